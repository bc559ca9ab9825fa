package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
