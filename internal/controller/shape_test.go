// Package controller_test checks that every controller package keeps the
// one shape docs/development/architecture.md describes, so a reader who knows one
// package can predict the next, and the shape cannot drift unnoticed.
package controller_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestEveryControllerPackageHasTheOneShape parses each directory of
// internal/controller (not their policy packages) and names every rule of
// the package contract it breaks.
func TestEveryControllerPackageHasTheOneShape(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range entries {
		if e.IsDir() {
			kinds = append(kinds, e.Name())
		}
	}
	if len(kinds) < 4 {
		t.Fatalf("found controller packages %v, want at least the four kinds", kinds)
	}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			for _, problem := range shapeProblems(kind) {
				t.Error(problem)
			}
		})
	}
}

// shapeProblems lists what the package in directory kind lacks or has twice.
func shapeProblems(kind string) []string {
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	var problems []string
	paths, _ := filepath.Glob(filepath.Join(kind, "*.go"))
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return []string{err.Error()}
		}
		files[filepath.Base(p)] = f
	}
	for _, want := range []string{kind + "_controller.go", kind + "_status.go", kind + "_health.go", kind + "_cache.go", "metrics.go", "suite_test.go"} {
		if files[want] == nil {
			problems = append(problems, fmt.Sprintf("%s: no file %s", kind, want))
		}
	}
	if f := files["suite_test.go"]; f != nil && findFunc(f, "TestMain") == nil {
		problems = append(problems, kind+": suite_test.go has no TestMain")
	}
	events := 0
	for name, f := range files {
		p, n := fileProblems(kind, name, f)
		problems = append(problems, p...)
		events += n
	}
	if events == 0 {
		problems = append(problems, kind+": no Event* reason constants")
	}
	if f := files[kind+"_controller.go"]; f != nil {
		if findFunc(f, "Setup") == nil {
			problems = append(problems, fmt.Sprintf("%s: no func Setup(ctrl.Manager, setupoptions.Options) error in %s_controller.go", kind, kind))
		}
		if !hasConst(f, "ControllerName") {
			problems = append(problems, fmt.Sprintf("%s: no ControllerName in %s_controller.go", kind, kind))
		}
	}
	if f := files[kind+"_status.go"]; f != nil && findFunc(f, "computeStatus") == nil {
		problems = append(problems, fmt.Sprintf("%s: no pure computeStatus in %s_status.go", kind, kind))
	}
	if f := files[kind+"_health.go"]; f != nil && findFunc(f, "health") == nil {
		problems = append(problems, fmt.Sprintf("%s: no health judgement (Ready, Stalled) in %s_health.go", kind, kind))
	}
	return problems
}

// fileProblems checks one file of the package in directory kind, and counts
// its Event* constants.
func fileProblems(kind, name string, f *ast.File) (problems []string, events int) {
	if want := kind; !strings.HasSuffix(name, "_test.go") && f.Name.Name != want {
		problems = append(problems, fmt.Sprintf("%s/%s: package %s, want %s", kind, name, f.Name.Name, want))
	}
	for _, imp := range f.Imports {
		if imp.Path.Value == `"sigs.k8s.io/controller-runtime/pkg/log"` && (imp.Name == nil || imp.Name.Name != "logf") {
			problems = append(problems, fmt.Sprintf("%s/%s: controller-runtime's log imported other than as logf", kind, name))
		}
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			problems = append(problems, funcProblems(kind, name, d)...)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				v, ok := s.(*ast.ValueSpec)
				if !ok || d.Tok != token.CONST || strings.HasSuffix(name, "_test.go") {
					continue
				}
				for _, n := range v.Names {
					switch {
					case strings.HasPrefix(n.Name, "Event"):
						events++
					case strings.HasPrefix(n.Name, "Reason"):
						problems = append(problems, fmt.Sprintf("%s/%s: Event reason %s: name it Event…", kind, name, n.Name))
					}
				}
			}
		}
	}
	return problems, events
}

// funcProblems checks one top-level function of file name against the
// contract: Setup's signature, the constructors' signatures, and where
// Needs, CacheByObject and TestMain live.
func funcProblems(kind, name string, d *ast.FuncDecl) []string {
	fn := d.Name.Name
	var problems []string
	if d.Recv != nil {
		if fn == "SetupWithManager" {
			problems = append(problems, fmt.Sprintf("%s/%s: SetupWithManager: only Setup is exported to set a controller up", kind, name))
		}
		return problems
	}
	switch {
	case fn == "Setup":
		problems = append(problems, setupProblems(kind, name, d)...)
	case fn == "Needs" || fn == "CacheByObject":
		if name != kind+"_cache.go" {
			problems = append(problems, fmt.Sprintf("%s/%s: %s belongs in %s_cache.go", kind, name, fn, kind))
		}
	case fn == "TestMain" && name != "suite_test.go":
		problems = append(problems, fmt.Sprintf("%s/%s: TestMain belongs in suite_test.go", kind, name))
	case strings.HasPrefix(fn, "New") && strings.HasSuffix(fn, "Reconciler") && !strings.HasSuffix(name, "_test.go"):
		p := params(d)
		if len(p) < 2 || p[0] != "client.Client" || !slices.Contains(p, "events.EventRecorder") {
			problems = append(problems, fmt.Sprintf("%s/%s: %s%v: a constructor takes the client first and the recorder, and every other dependency", kind, name, fn, p))
		}
	}
	return problems
}

func findFunc(f *ast.File, name string) *ast.FuncDecl {
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == name {
			return fd
		}
	}
	return nil
}

func hasConst(f *ast.File, name string) bool {
	for _, d := range f.Decls {
		if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.CONST {
			for _, s := range gd.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					if n.Name == name {
						return true
					}
				}
			}
		}
	}
	return false
}

// params lists the types of d's parameters, one per parameter.
func params(d *ast.FuncDecl) []string {
	var out []string
	for _, p := range d.Type.Params.List {
		n := max(1, len(p.Names))
		for range n {
			out = append(out, typeString(p.Type))
		}
	}
	return out
}

func results(d *ast.FuncDecl) string {
	if d.Type.Results == nil {
		return ""
	}
	var out []string
	for _, r := range d.Type.Results.List {
		out = append(out, typeString(r.Type))
	}
	return strings.Join(out, ", ")
}

func typeString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return typeString(e.X) + "." + e.Sel.Name
	case *ast.StarExpr:
		return "*" + typeString(e.X)
	case *ast.ArrayType:
		return "[]" + typeString(e.Elt)
	}
	return fmt.Sprintf("%T", e)
}

// setupProblems checks Setup: its signature, and that it sets no field of
// what a constructor returned.
func setupProblems(kind, name string, d *ast.FuncDecl) []string {
	var problems []string
	if got := params(d); !slices.Equal(got, []string{"ctrl.Manager", "setupoptions.Options"}) || results(d) != "error" || name != kind+"_controller.go" {
		problems = append(problems, fmt.Sprintf("%s/%s: Setup%v %s: want Setup(ctrl.Manager, setupoptions.Options) error in %s_controller.go", kind, name, got, results(d), kind))
	}
	ast.Inspect(d.Body, func(n ast.Node) bool {
		if a, ok := n.(*ast.AssignStmt); ok {
			for _, l := range a.Lhs {
				if sel, ok := l.(*ast.SelectorExpr); ok {
					problems = append(problems, fmt.Sprintf("%s/%s: Setup sets %s.%s after construction: pass it to the constructor", kind, name, typeString(sel.X), sel.Sel.Name))
				}
			}
		}
		return true
	})
	return problems
}
