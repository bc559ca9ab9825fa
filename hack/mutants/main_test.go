package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// check names a mutant whose code moved (found no longer, or twice) and one
// that changes nothing; apply writes the mutant once.
func TestCheckAndApply(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "a.go"), []byte("x := 1\ny := 2\ny := 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Catalogue{Mutants: []Mutant{
		{ID: "ok", File: "a.go", Find: "x := 1", Replace: "x := 0"},
		{ID: "moved", File: "a.go", Find: "z := 3", Replace: "z := 0"},
		{ID: "twice", File: "a.go", Find: "y := 2", Replace: "y := 0"},
		{ID: "same", File: "a.go", Find: "x := 1", Replace: "x := 1"},
	}}
	err := check(root, c)
	if err == nil {
		t.Fatal("check found nothing wrong")
	}
	for _, want := range []string{"mutant moved", "mutant twice", "mutant same changes nothing"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("check did not name %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "mutant ok") {
		t.Errorf("check named the mutant that applies:\n%v", err)
	}
	if err := apply(root, c.Mutants[0]); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "a.go")); string(b) != "x := 0\ny := 2\ny := 2\n" {
		t.Errorf("applied: %q", b)
	}
}

// The catalogue in the repository loads, and every mutant in it applies.
func TestTheCatalogueApplies(t *testing.T) {
	c, err := load(filepath.Join("..", "..", "test", "mutants", "catalogue.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := check(filepath.Join("..", ".."), c); err != nil {
		t.Fatal(err)
	}
}

// A mutant that does not compile is refused as the catalogue's mistake,
// not counted as killed; one the tests catch is killed.
func TestAStillbornMutantIsNoKill(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"go.mod":    "module example.com/m\n\ngo 1.22\n",
		"m.go":      "package m\n\nfunc Add(a, b int) int { return a + b }\n",
		"m_test.go": "package m\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal(\"1+2\")\n\t}\n}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	restore := func() {
		if err := os.WriteFile(filepath.Join(root, "m.go"), []byte(files["m.go"]), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, err := runOne(root, Mutant{ID: "stillborn", File: "m.go", Find: "a + b", Replace: "a + c", Tests: []string{"./..."}}, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "mutant stillborn does not compile") {
		t.Fatalf("a mutant that does not compile: %v", err)
	}
	restore()
	r, err := runOne(root, Mutant{ID: "caught", File: "m.go", Find: "a + b", Replace: "a - b", Tests: []string{"./..."}}, time.Minute)
	if err != nil || !r.killed {
		t.Fatalf("a mutant the test catches: %+v, %v", r, err)
	}
}

// A random mutant is placed in its function (Type.Method for a method) with
// its line's code; an equivalent entry leaves it out of the rate, and an
// entry of a package that ran but matches no mutant fails the run.
func TestRandomMutantsPlacedAndCounted(t *testing.T) {
	src := []byte("package p\n\ntype T struct{}\n\nfunc (t *T) Big(n int) bool {\n\treturn n > 3\n}\n\nvar x = 1 + 2\n")
	fn, code, err := placeMutant("p/p.go", src, 6, 11)
	if err != nil || fn != "T.Big" || code != "return n > 3" {
		t.Fatalf("placed at %q %q (%v), want T.Big, return n > 3", fn, code, err)
	}
	if fn, _, _ := placeMutant("p/p.go", src, 9, 11); fn != "package" {
		t.Errorf("a mutant outside any function is in %q, want package", fn)
	}
	mutant := func(status, code string) randomMutant {
		return randomMutant{File: "p/p.go", Func: "T.Big", Mutation: "CONDITIONALS_BOUNDARY", Code: code, Status: status}
	}
	ms := []randomMutant{mutant(statusKilled, "a"), mutant(statusKilled, "b"), mutant(statusLived, "c"), mutant(statusLived, "d"), mutant("TIMED OUT", "e")}
	equivalent := Equivalent{File: "p/p.go", Func: "T.Big", Mutation: "CONDITIONALS_BOUNDARY", Code: "d", Why: "no test can tell"}
	var out strings.Builder
	err = reportRandom(&out, &Random{Target: 60, Equivalent: []Equivalent{equivalent}}, ms, map[string]bool{"p": true})
	if err != nil {
		t.Errorf("2 of 3 killed against a target of 60%%: %v", err)
	}
	for _, want := range []string{"2 of 3 random mutants killed: 66.7%", "survived: p/p.go:0:0 T.Big CONDITIONALS_BOUNDARY: c", "equivalent: p/p.go:0:0 T.Big CONDITIONALS_BOUNDARY: d (no test can tell)", "timed out 1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
	stale := equivalent
	stale.Code = "gone"
	err = reportRandom(&out, &Random{Target: 60, Equivalent: []Equivalent{equivalent, stale}}, ms, map[string]bool{"p": true})
	if err == nil || !strings.Contains(err.Error(), `"gone" matches no mutant`) {
		t.Errorf("a stale entry gave %v", err)
	}
	if err := reportRandom(&out, &Random{Target: 95}, ms, nil); err == nil || !strings.Contains(err.Error(), "under the target") {
		t.Errorf("2 of 4 killed against a target of 95%%: %v", err)
	}
}
