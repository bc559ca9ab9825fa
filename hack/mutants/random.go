package main

// The random mutants: where the catalogue's bugs are chosen by hand, these
// are every mutation gremlins (github.com/go-gremlins/gremlins) makes of
// the pure packages' covered code, each tested against its own package's
// unit tests. See test/mutants/random.yaml.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Random is test/mutants/random.yaml.
type Random struct {
	// Target is the share of the mutants (equivalent ones left out) the
	// unit tests must kill, in percent.
	Target   float64         `json:"target"`
	Packages []RandomPackage `json:"packages"`
	// Equivalent are the mutants no test can tell apart, each with why.
	Equivalent []Equivalent `json:"equivalent"`
}

// RandomPackage is one pure package whose code gremlins mutates.
type RandomPackage struct {
	// Dir is the package's directory.
	Dir string `json:"dir"`
	// Exclude are regexps of the files (their paths within Dir, as
	// gremlins matches them) gremlins leaves alone: the package's files
	// that are not pure.
	Exclude []string `json:"exclude,omitempty"`
	// Why says why the package is pure, or why the excluded files are not.
	Why string `json:"why"`
}

// Equivalent is a mutant that changes no behaviour a test could see. It is
// keyed by what it changes, not where: the file, the function (Type.Method
// for a method), the gremlins mutation and the mutated line's code, so an
// edit elsewhere in the file does not lose it.
type Equivalent struct {
	File     string `json:"file"`
	Func     string `json:"func"`
	Mutation string `json:"mutation"`
	Code     string `json:"code"`
	Why      string `json:"why"`
}

// gremlinsReport is the part of gremlins' -o JSON report read here.
type gremlinsReport struct {
	Files []struct {
		FileName  string `json:"file_name"`
		Mutations []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Line   int    `json:"line"`
			Column int    `json:"column"`
		} `json:"mutations"`
	} `json:"files"`
}

// randomMutant is one mutation gremlins tested, placed in its function.
type randomMutant struct {
	File, Func, Mutation, Code, Status string
	Line, Column                       int
}

func (m randomMutant) String() string {
	return fmt.Sprintf("%s:%d:%d %s %s: %s", m.File, m.Line, m.Column, m.Func, m.Mutation, m.Code)
}

// gremlins' statuses of a mutant it ran: killed and lived count for the
// rate; a mutant that timed out, did not compile or no test covers does not.
const (
	statusKilled = "KILLED"
	statusLived  = "LIVED"
)

func loadRandom(path string) (*Random, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Random
	if err := yaml.UnmarshalStrict(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, e := range r.Equivalent {
		if e.File == "" || e.Func == "" || e.Mutation == "" || e.Code == "" || e.Why == "" {
			return nil, fmt.Errorf("%s: equivalent mutant %+v lacks file, func, mutation, code or why", path, e)
		}
	}
	return &r, nil
}

// runRandom runs gremlins over each package of r (those whose directory
// contains only), prints what each mutant did, the kill rate and the
// survivors, and fails under the target or when an equivalent entry
// matches no mutant any more.
func runRandom(r *Random, gremlins, only string) error {
	if gremlins == "" {
		return errors.New("random needs -gremlins BIN: `make test-mutants-random` builds the pinned one")
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	var all []randomMutant
	ran := map[string]bool{}
	for _, p := range r.Packages {
		if !strings.Contains(p.Dir, only) {
			continue
		}
		start := time.Now()
		ms, err := unleash(root, gremlins, p)
		if err != nil {
			return err
		}
		counts := map[string]int{}
		for _, m := range ms {
			counts[m.Status]++
		}
		fmt.Printf("%-40s %3d killed %3d survived %3d other  %5.0fs\n", p.Dir, counts[statusKilled], counts[statusLived],
			len(ms)-counts[statusKilled]-counts[statusLived], time.Since(start).Seconds())
		ran[p.Dir] = true
		all = append(all, ms...)
	}
	if len(all) == 0 {
		return errors.New("gremlins made no mutant")
	}
	return reportRandom(os.Stdout, r, all, ran)
}

// unleash runs gremlins over one package, with only that package's tests
// run against each mutant, and places each mutant in its function.
func unleash(root, gremlins string, p RandomPackage) ([]randomMutant, error) {
	out, err := os.CreateTemp("", "deckhand-gremlins-*.json")
	if err != nil {
		return nil, err
	}
	_ = out.Close()
	defer func() { _ = os.Remove(out.Name()) }()
	// One worker: the tests of one mutant at a time. A timeout ten times
	// what the coverage run took (three by default) leaves room for the
	// mutant's compile on a busy machine, so only a mutant that loops is
	// timed out.
	args := []string{"unleash", "--workers", "1", "--timeout-coefficient", "10", "-o", out.Name()}
	for _, x := range p.Exclude {
		args = append(args, "-E", x)
	}
	cmd := exec.Command(gremlins, append(args, p.Dir)...)
	cmd.Dir = root
	// -count=1: a cached coverage run would take no time, and gremlins
	// times each mutant's tests out against it.
	// gremlins copies the module without bin/ (a link): a package whose
	// tests start envtest finds the pinned apiserver through
	// KUBEBUILDER_ASSETS.
	cmd.Env = append(os.Environ(), "GOFLAGS=-count=1", "KUBEBUILDER_ASSETS="+filepath.Join(root, "bin", "k8s"))
	log, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("gremlins over %s: %w\n%s", p.Dir, err, log)
	}
	b, err := os.ReadFile(out.Name())
	if err != nil {
		return nil, err
	}
	var rep gremlinsReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("gremlins' report over %s: %w", p.Dir, err)
	}
	var ms []randomMutant
	for _, f := range rep.Files {
		file := filepath.ToSlash(filepath.Join(p.Dir, f.FileName))
		src, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			return nil, err
		}
		for _, g := range f.Mutations {
			fn, code, err := placeMutant(file, src, g.Line, g.Column)
			if err != nil {
				return nil, err
			}
			ms = append(ms, randomMutant{File: file, Func: fn, Mutation: g.Type, Code: code, Status: g.Status, Line: g.Line, Column: g.Column})
		}
	}
	return ms, nil
}

// placeMutant names the function that holds line:column of src (Type.Method
// for a method, "package" outside any function) and the line's code.
func placeMutant(file string, src []byte, line, column int) (fn, code string, err error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.SkipObjectResolution)
	if err != nil {
		return "", "", err
	}
	lines := bytes.Split(src, []byte("\n"))
	if line < 1 || line > len(lines) {
		return "", "", fmt.Errorf("%s has no line %d", file, line)
	}
	code = strings.TrimSpace(string(lines[line-1]))
	pos := fset.File(f.Pos()).LineStart(line) + token.Pos(column-1)
	fn = "package"
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || pos < fd.Pos() || pos >= fd.End() {
			continue
		}
		fn = fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			fn = receiverType(fd.Recv.List[0].Type) + "." + fn
		}
	}
	return fn, code, nil
}

func receiverType(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return receiverType(t.X)
	case *ast.IndexExpr:
		return receiverType(t.X)
	case *ast.IndexListExpr:
		return receiverType(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}

func (e Equivalent) matches(m randomMutant) bool {
	return e.File == m.File && e.Func == m.Func && e.Mutation == m.Mutation && e.Code == m.Code
}

// reportRandom prints the tally per status, the kill rate, each survivor
// and each equivalent mutant. ran are the package directories run: an
// equivalent entry of one of them that matches no mutant has gone stale.
func reportRandom(w io.Writer, r *Random, ms []randomMutant, ran map[string]bool) error {
	counts := map[string]int{}
	var survivors, equivalent []string
	used := make([]bool, len(r.Equivalent))
	for _, m := range ms {
		i := slices.IndexFunc(r.Equivalent, func(e Equivalent) bool { return e.matches(m) })
		if i >= 0 {
			used[i] = true
		}
		switch {
		case m.Status == statusLived && i >= 0:
			counts["EQUIVALENT"]++
			equivalent = append(equivalent, fmt.Sprintf("%s (%s)", m, r.Equivalent[i].Why))
		case m.Status == statusLived:
			counts[statusLived]++
			survivors = append(survivors, m.String())
		default:
			counts[m.Status]++
		}
	}
	var stale []error
	for i, e := range r.Equivalent {
		if !used[i] && ran[filepath.ToSlash(filepath.Dir(e.File))] {
			stale = append(stale, fmt.Errorf("equivalent entry %s %s %s %q matches no mutant: the code changed; remove or update it", e.File, e.Func, e.Mutation, e.Code))
		}
	}
	killed, lived := counts[statusKilled], counts[statusLived]
	tally := make([]string, 0, len(counts))
	for s, n := range counts {
		tally = append(tally, fmt.Sprintf("%s %d", strings.ToLower(s), n))
	}
	slices.Sort(tally)
	lines := []string{"", "random mutants: " + strings.Join(tally, ", ")}
	errs := stale
	if killed+lived == 0 {
		errs = append(errs, errors.New("no random mutant was killed or survived"))
	} else {
		rate := 100 * float64(killed) / float64(killed+lived)
		lines = append(lines, fmt.Sprintf("%d of %d random mutants killed: %.1f%% (target %.0f%%; equivalent, timed out, not viable and not covered left out)",
			killed, killed+lived, rate, r.Target))
		for _, s := range survivors {
			lines = append(lines, "survived: "+s)
		}
		for _, s := range equivalent {
			lines = append(lines, "equivalent: "+s)
		}
		if rate < r.Target {
			errs = append(errs, fmt.Errorf("random mutants' kill rate %.1f%% is under the target %.0f%%", rate, r.Target))
		}
	}
	if _, err := io.WriteString(w, strings.Join(lines, "\n")+"\n"); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// checkRandom checks that each package says why it is pure and that its
// exclusions compile, before gremlins is asked to use them.
func checkRandom(r *Random) error {
	var errs []error
	for _, p := range r.Packages {
		if p.Dir == "" || p.Why == "" {
			errs = append(errs, fmt.Errorf("random package %+v lacks dir or why", p))
		}
		for _, x := range p.Exclude {
			if _, err := regexp.Compile(x); err != nil {
				errs = append(errs, fmt.Errorf("random package %s: exclude %q: %w", p.Dir, x, err))
			}
		}
	}
	return errors.Join(errs...)
}
