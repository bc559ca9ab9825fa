// Command mutants measures how strong Deckhand's tests are: it puts each
// seeded bug of the catalogue (test/mutants/catalogue.yaml) into a copy of
// the committed tree, one at a time, runs the tests the bug should fail,
// and reports which bugs the tests killed and which survived.
//
//	go run ./hack/mutants check               every mutant still applies to the tree (make verify)
//	go run ./hack/mutants run [-only SUBSTR]  run them (make test-mutants): a table, the kill rate, the survivors
//	go run ./hack/mutants random -gremlins BIN [-only SUBSTR]
//	                                          gremlins' mutants of the pure packages (test/mutants/random.yaml,
//	                                          make test-mutants-random): the kill rate, the survivors
//
// A mutant is a small patch a developer could plausibly write: a file, a
// piece of it that must occur exactly once, and what replaces it. A
// mutant marked equivalent (with why) changes no behaviour a test could
// see; it is listed and left out of the rate. run exits non-zero when the
// rate is under the catalogue's target.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Catalogue is test/mutants/catalogue.yaml.
type Catalogue struct {
	// Target is the share of the mutants (equivalent ones left out) the
	// tests must kill, in percent.
	Target  float64  `json:"target"`
	Mutants []Mutant `json:"mutants"`
}

// Mutant is one seeded bug.
type Mutant struct {
	ID string `json:"id"`
	// Why is the bug it stands for, as a developer might write it.
	Why     string `json:"why"`
	File    string `json:"file"`
	Find    string `json:"find"`
	Replace string `json:"replace"`
	// Tests are the packages whose tests must kill it (go test patterns).
	Tests []string `json:"tests"`
	// Tags are build tags for go test (faults, for test/faults).
	Tags string `json:"tags,omitempty"`
	// Run narrows the tests (go test -run), for a slow package.
	Run string `json:"run,omitempty"`
	// Equivalent, when set, says why no test can tell the mutant apart.
	Equivalent string `json:"equivalent,omitempty"`
}

func main() {
	fs := flag.NewFlagSet("mutants", flag.ExitOnError)
	only := fs.String("only", "", "run only the mutants whose id contains this")
	timeout := fs.Duration("timeout", 15*time.Minute, "how long one mutant's tests may run")
	catalogue := fs.String("catalogue", "test/mutants/catalogue.yaml", "the catalogue")
	random := fs.String("random", "test/mutants/random.yaml", "the pure packages gremlins mutates and its equivalent mutants")
	gremlins := fs.String("gremlins", "", "the gremlins binary (random)")
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: mutants check | run [-only SUBSTR] [-timeout D] | random -gremlins BIN [-only SUBSTR]")
		os.Exit(2)
	}
	_ = fs.Parse(os.Args[2:])
	var err error
	switch os.Args[1] {
	case "check":
		err = checkAll(*catalogue, *random)
	case "run":
		var c *Catalogue
		if c, err = load(*catalogue); err == nil {
			err = run(c, *only, *timeout)
		}
	case "random":
		var r *Random
		if r, err = loadRandom(*random); err == nil {
			if err = checkRandom(r); err == nil {
				err = runRandom(r, *gremlins, *only)
			}
		}
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(1)
	}
}

func load(path string) (*Catalogue, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Catalogue
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ids := map[string]bool{}
	for _, m := range c.Mutants {
		if m.ID == "" || m.File == "" || m.Find == "" || len(m.Tests) == 0 || m.Why == "" {
			return nil, fmt.Errorf("%s: mutant %q lacks id, why, file, find or tests", path, m.ID)
		}
		if ids[m.ID] {
			return nil, fmt.Errorf("%s: two mutants are %q", path, m.ID)
		}
		ids[m.ID] = true
	}
	return &c, nil
}

// checkAll checks the catalogue and the random mutants' file.
func checkAll(catalogue, random string) error {
	c, err := load(catalogue)
	if err != nil {
		return err
	}
	r, err := loadRandom(random)
	if err != nil {
		return err
	}
	return errors.Join(check(".", c), checkRandom(r))
}

// apply writes m into the tree at root.
func apply(root string, m Mutant) error {
	path := filepath.Join(root, m.File)
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("mutant %s: %w", m.ID, err)
	}
	if n := bytes.Count(b, []byte(m.Find)); n != 1 {
		return fmt.Errorf("mutant %s: %s holds what it finds %d times, want once: the code moved; update the mutant", m.ID, m.File, n)
	}
	return os.WriteFile(path, bytes.Replace(b, []byte(m.Find), []byte(m.Replace), 1), 0o600)
}

// check says which mutants no longer apply to the tree at root.
func check(root string, c *Catalogue) error {
	var errs []error
	for _, m := range c.Mutants {
		b, err := os.ReadFile(filepath.Join(root, m.File))
		if err != nil {
			errs = append(errs, fmt.Errorf("mutant %s: %w", m.ID, err))
			continue
		}
		if n := bytes.Count(b, []byte(m.Find)); n != 1 {
			errs = append(errs, fmt.Errorf("mutant %s: %s holds what it finds %d times, want once: the code moved; update the mutant", m.ID, m.File, n))
		}
		if m.Find == m.Replace {
			errs = append(errs, fmt.Errorf("mutant %s changes nothing", m.ID))
		}
	}
	return errors.Join(errs...)
}

// result is what one mutant's tests did.
type result struct {
	m       Mutant
	killed  bool
	by      string
	elapsed time.Duration
}

// run puts each mutant into a worktree of HEAD in turn and runs its tests.
func run(c *Catalogue, only string, timeout time.Duration) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	if err := check(root, c); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "deckhand-mutants-")
	if err != nil {
		return err
	}
	tree := filepath.Join(dir, "tree")
	if out, err := exec.Command("git", "worktree", "add", "--detach", tree, "HEAD").CombinedOutput(); err != nil {
		return fmt.Errorf("git worktree add: %w\n%s", err, out)
	}
	defer func() {
		_ = exec.Command("git", "worktree", "remove", "--force", tree).Run()
		_ = os.RemoveAll(dir)
	}()
	// The pinned binaries (envtest's apiserver and etcd) are the tree's.
	if err := os.Symlink(filepath.Join(root, "bin"), filepath.Join(tree, "bin")); err != nil {
		return err
	}
	var results []result
	for _, m := range c.Mutants {
		if !strings.Contains(m.ID, only) || m.Equivalent != "" {
			continue
		}
		r, err := runOne(tree, m, timeout)
		if err != nil {
			return err
		}
		state := "SURVIVED"
		if r.killed {
			state = "killed"
		}
		fmt.Printf("%-48s %-8s %6.0fs  %s\n", m.ID, state, r.elapsed.Seconds(), r.by)
		results = append(results, r)
	}
	return report(c, results)
}

func runOne(tree string, m Mutant, timeout time.Duration) (result, error) {
	defer func() { _ = exec.Command("git", "-C", tree, "checkout", "--", ".").Run() }()
	if err := apply(tree, m); err != nil {
		return result{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	// A mutant that does not compile is a mistake of the catalogue, not a
	// bug the tests caught: compiling its packages and their tests (no test
	// run) must succeed before a failure counts as a kill.
	compile := []string{"test", "-count=1", "-run", "^$"}
	if m.Tags != "" {
		compile = append(compile, "-tags", m.Tags)
	}
	build := exec.CommandContext(ctx, "go", append(compile, m.Tests...)...)
	build.Dir = tree
	if out, err := build.CombinedOutput(); err != nil {
		return result{}, fmt.Errorf("mutant %s does not compile (%s): fix its replace in the catalogue", m.ID, firstFailure(out))
	}
	args := []string{"test", "-count=1", "-failfast", "-timeout", timeout.String()}
	if m.Tags != "" {
		args = append(args, "-tags", m.Tags)
	}
	if m.Run != "" {
		args = append(args, "-run", m.Run)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, m.Tests...)...)
	cmd.Dir = tree
	cmd.Env = append(os.Environ(), "KUBEBUILDER_ASSETS="+filepath.Join(tree, "bin", "k8s"))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	r := result{m: m, elapsed: time.Since(start), killed: err != nil}
	if r.killed {
		r.by = firstFailure(out)
	}
	return r, nil
}

// firstFailure is the first line of go test's output that names what
// failed: a test, or a build error.
func firstFailure(out []byte) string {
	for line := range strings.Lines(string(out)) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "--- FAIL") || strings.Contains(line, "[build failed]") || strings.HasPrefix(line, "panic:") {
			return line
		}
	}
	return "go test failed"
}

func report(c *Catalogue, results []result) error {
	killed := 0
	var survivors []string
	for _, r := range results {
		if r.killed {
			killed++
		} else {
			survivors = append(survivors, fmt.Sprintf("%s (%s): %s", r.m.ID, r.m.File, r.m.Why))
		}
	}
	if len(results) == 0 {
		return errors.New("no mutant ran")
	}
	rate := 100 * float64(killed) / float64(len(results))
	fmt.Printf("\n%d of %d mutants killed: %.1f%% (target %.0f%%)\n", killed, len(results), rate, c.Target)
	for _, s := range survivors {
		fmt.Println("survived:", s)
	}
	for _, m := range c.Mutants {
		if m.Equivalent != "" {
			fmt.Printf("equivalent: %s: %s\n", m.ID, m.Equivalent)
		}
	}
	if rate < c.Target {
		return fmt.Errorf("kill rate %.1f%% is under the target %.0f%%", rate, c.Target)
	}
	return nil
}
