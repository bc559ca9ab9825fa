package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deckhand-dev/deckhand/internal/textdiff"
)

func TestNewKindRefusesBadNames(t *testing.T) {
	tests := map[string]struct{ kind, group, version, want string }{
		"lower-case kind": {"gadget", "widget", "v1", `kind "gadget"`},
		"group with dots": {"Gadget", "widget.deckhand.dev", "v1", `group "widget.deckhand.dev"`},
		"version":         {"Gadget", "widget", "1", `version "1"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := newKind(tc.kind, tc.group, tc.version); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("newKind = %v, want an error naming %s", err, tc.want)
			}
		})
	}
	k, err := newKind("ModelBin", "store", "v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	if k.Plural != "modelbins" || k.Short != "mb" || k.FullGroup != "store.deckhand.dev" || k.APIAlias != "storev1alpha1" {
		t.Errorf("newKind = %+v", k)
	}
}

// scaffold writes the kind's files and its PROJECT entry; a second run
// writes nothing and says why; a kind in an existing group version gets no
// second groupversion_info.go.
func TestScaffoldWritesOnlyNewFiles(t *testing.T) {
	root := t.TempDir()
	project := "domain: deckhand.dev\nresources:\n"
	if err := os.WriteFile(filepath.Join(root, "PROJECT"), []byte(project), 0o644); err != nil {
		t.Fatal(err)
	}
	k, err := newKind("Gadget", "widget", "v1")
	if err != nil {
		t.Fatal(err)
	}
	written, err := scaffold(root, k)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != len(files)+2 || !slices.Contains(written, "api/widget/v1/groupversion_info.go") || !slices.Contains(written, "PROJECT") {
		t.Errorf("written = %v, want every file, groupversion_info.go and PROJECT", written)
	}
	data, err := os.ReadFile(filepath.Join(root, "PROJECT"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), project) || !strings.Contains(string(data), "  kind: Gadget\n  path: github.com/deckhand-dev/deckhand/api/widget/v1\n") {
		t.Errorf("PROJECT:\n%s", data)
	}
	if _, err := scaffold(root, k); err == nil || !strings.Contains(err.Error(), "PROJECT has a kind Gadget") {
		t.Errorf("a second run: %v, want a refusal", err)
	}

	other, err := newKind("Sprocket", "widget", "v1")
	if err != nil {
		t.Fatal(err)
	}
	written, err = scaffold(root, other)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(written, "api/widget/v1/groupversion_info.go") {
		t.Error("a second kind of api/widget/v1 wrote groupversion_info.go again")
	}
	if err := os.WriteFile(filepath.Join(root, "PROJECT"), []byte(project), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := scaffold(root, other); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("over existing files: %v, want a refusal", err)
	}
}

// With -webhook: the webhook and its test, named Setup in a new package,
// Setup<Kind> beside another kind's webhook package.
func TestScaffoldWithWebhook(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "PROJECT"), []byte("domain: deckhand.dev\nresources:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"Widget", "Doohickey"} {
		wk, err := newKind(name, "tinker", "v1")
		if err != nil {
			t.Fatal(err)
		}
		wk.Webhook = true
		written, err := scaffold(root, wk)
		if err != nil {
			t.Fatal(err)
		}
		path := "internal/webhook/tinker/v1/" + wk.Lower + "_webhook.go"
		if !slices.Contains(written, path) || !slices.Contains(written, "internal/webhook/tinker/v1/"+wk.Lower+"_webhook_test.go") {
			t.Errorf("%s: written = %v, want its webhook and test", name, written)
		}
		registry, err := os.ReadFile(filepath.Join(root, "internal/manager/controller_"+wk.Lower+".go"))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"tinkerwebhook.Setup,", "tinkerwebhook.SetupDoohickey,"}[i]
		if !strings.Contains(string(registry), "SetupWebhooks: "+want) {
			t.Errorf("%s's registry entry does not name %s:\n%s", name, want, registry)
		}
	}
}

// TestAScaffoldedKindNeedsNoOtherEdit is the proof that adding a kind edits
// no list of kinds: in a copy of the repository (tracked and new files, as
// they are in the work tree), it scaffolds a throwaway kind (with a
// webhook, but in the short run), runs `make
// generate manifests` (which fails on a kind kindcheck finds missing
// anywhere) and builds everything, then runs the kind's own tests, the
// contract and shape tests, the kind's GitOps and fault-suite cases and the
// docs check, with no edit but the scaffolder's. The one step left is
// test/installs' RBAC golden files, which a person reviews and rewrites
// with UPDATE_GOLDEN=1: the test checks that they differ by the kind's
// rights only.
//
// It takes two to four minutes of both cores (it compiles the manager and
// starts envtest several times): set NEWKIND_PROOF=1 to run it.
// NEWKIND_PROOF=short (make test-unit) stops after the kind's own tests,
// in one to two.
func TestAScaffoldedKindNeedsNoOtherEdit(t *testing.T) {
	proof := os.Getenv("NEWKIND_PROOF")
	if proof == "" {
		t.Skip("set NEWKIND_PROOF=1 (or short) to scaffold a kind in a copy of the repository and run its checks (minutes)")
	}
	began := time.Now()
	root := copyRepo(t)
	run := func(env []string, name string, args ...string) {
		t.Helper()
		start := time.Now()
		cmd := exec.Command(name, args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		t.Logf("%s %s: %s", name, strings.Join(args, " "), time.Since(start).Round(time.Second))
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	scaffold := []string{"run", "./hack/newkind", "Gizmo", "tinker", "v1alpha1"}
	if proof != "short" {
		scaffold = slices.Insert(scaffold, 2, "-webhook")
	}
	run(nil, "go", scaffold...)
	run(nil, "make", "generate", "manifests")
	run(nil, "go", "build", "./...")
	run(nil, "go", "test", "-count=1", "./internal/controller/gizmo/")
	if proof == "short" {
		t.Logf("a scaffolded kind builds and passes its own tests: %s", time.Since(began).Round(time.Second))
		return
	}
	run(nil, "go", "vet", "-tags", "faults", "./test/faults/")
	run(nil, "go", "vet", "-tags", "e2e", "./test/e2e/")
	run(nil, "go", "test", "-count=1", "./internal/webhook/tinker/v1alpha1/", "./internal/controller/", "./hack/kindcheck/", "./hack/docgen/")
	run(nil, "go", "test", "-count=1", "-run", "^TestGizmoHealth$", "./test/gitops/")
	run([]string{"FAULTS_SCENARIO=Gizmo"}, "go", "test", "-tags", "faults", "-short", "-count=1", "-run", "^TestFaults$", "./test/faults/")
	run(nil, "go", "run", "./hack/docscheck")
	before := goldens(t, root)
	run([]string{"UPDATE_GOLDEN=1"}, "go", "test", "-count=1", "-run", "^TestEachModeGrantsWhatItsGoldenFileSays$", "./test/installs/")
	changed := 0
	for file, after := range goldens(t, root) {
		for _, line := range textdiff.Lines(before[file], after) {
			changed++
			if !strings.Contains(line, "gizmos") {
				t.Errorf("%s: the kind changed a right that is not its own: %s", file, line)
			}
		}
	}
	if changed == 0 {
		t.Error("no golden file grants the manager the kind's rights")
	}
	t.Logf("a scaffolded kind passes its checks: %s", time.Since(began).Round(time.Second))
}

// copyRepo copies the repository's tracked and new (not ignored) files into
// a temporary directory, with bin/ linked to this one's pinned tools.
func copyRepo(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", src, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("listing the repository's files: %v", err)
	}
	root := t.TempDir()
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if rel == "bin" || strings.HasPrefix(rel, "bin/") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, rel))
		if os.IsNotExist(err) {
			continue // deleted in the work tree
		}
		if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(filepath.Join(src, rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, rel), data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	bin, err := filepath.EvalSymlinks(filepath.Join(src, "bin"))
	if err != nil {
		t.Fatalf("the pinned tools in bin/: %v", err)
	}
	if err := os.Symlink(bin, filepath.Join(root, "bin")); err != nil {
		t.Fatal(err)
	}
	return root
}

// goldens reads test/installs' RBAC golden files under root.
func goldens(t *testing.T, root string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "test", "installs", "testdata", "rbac", "*.golden"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	out := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = string(data)
	}
	return out
}
