package main

import (
	"bytes"
	"cmp"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	"github.com/deckhand-dev/deckhand/internal/manager"
)

// The metrics, Events and conditions pages are read from the source, so
// that they cannot drift from it: every metric declared with
// prometheus.New… under internal/, every constant Event… of a controller
// package, and every constant Condition… and Reason… of the API's newest
// version of each group. Each must carry a comment (a metric its Help):
// docgen refuses one that does not, so a new one is documented where it is
// declared.

// metric is one metric Deckhand exports.
type metric struct {
	name, kind, help, pkg string
	labels                []string
}

// constant is a documented string constant.
type constant struct {
	name, value, doc, pkg string
}

// parseDir parses the non-test Go files of dir.
func parseDir(fset *token.FileSet, dir string) ([]*ast.File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// packageDirs lists root and every directory under it holding Go files.
func packageDirs(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if m, _ := filepath.Glob(filepath.Join(path, "*.go")); len(m) > 0 {
				dirs = append(dirs, path)
			}
		}
		return nil
	})
	return dirs, err
}

var newMetric = regexp.MustCompile(`^New(Counter|Gauge|Histogram|Summary)(Vec)?$`)

// readMetrics finds every prometheus.New…(prometheus.…Opts{…}, labels) (and
// prometheus.NewDesc) in the packages under root.
func readMetrics(root string) ([]metric, error) {
	dirs, err := packageDirs(root)
	if err != nil {
		return nil, err
	}
	var out []metric
	for _, dir := range dirs {
		fset := token.NewFileSet()
		files, err := parseDir(fset, dir)
		if err != nil {
			return nil, err
		}
		vars := stringSliceVars(files)
		var bad token.Pos
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if m, ok := metricOf(call, vars); ok {
					m.pkg = dir
					if m.name == "" || m.help == "" {
						bad = call.Pos()
					}
					out = append(out, m)
				}
				return true
			})
		}
		if bad.IsValid() {
			return nil, fmt.Errorf("%s: a metric without a literal name and help", fset.Position(bad))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// metricOf reads the metric call declares, if it declares one.
func metricOf(call *ast.CallExpr, vars map[string][]string) (metric, bool) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || !isIdent(sel.X, "prometheus") || len(call.Args) == 0 {
		return metric{}, false
	}
	if sel.Sel.Name == "NewDesc" && len(call.Args) >= 3 {
		// A collector of its own (a value computed when scraped): a gauge.
		m := metric{kind: "gauge", labels: stringSlice(call.Args[2], vars)}
		m.name, _ = stringValue(call.Args[0])
		m.help, _ = stringValue(call.Args[1])
		return m, true
	}
	kind := newMetric.FindStringSubmatch(sel.Sel.Name)
	opts, ok := call.Args[0].(*ast.CompositeLit)
	if kind == nil || !ok {
		return metric{}, false
	}
	m := metric{kind: strings.ToLower(kind[1])}
	for _, el := range opts.Elts {
		if kv, ok := el.(*ast.KeyValueExpr); ok {
			switch {
			case isIdent(kv.Key, "Name"):
				m.name, _ = stringValue(kv.Value)
			case isIdent(kv.Key, "Help"):
				m.help, _ = stringValue(kv.Value)
			}
		}
	}
	if len(call.Args) > 1 {
		m.labels = stringSlice(call.Args[1], vars)
	}
	return m, true
}

// stringSliceVars maps the package-level variables declared as []string{…}
// literals to their values (labels shared by metrics).
func stringSliceVars(files []*ast.File) map[string][]string {
	vars := map[string][]string{}
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						if v := stringSlice(vs.Values[i], nil); v != nil {
							vars[name.Name] = v
						}
					}
				}
			}
		}
	}
	return vars
}

func stringSlice(e ast.Expr, vars map[string][]string) []string {
	switch e := e.(type) {
	case *ast.Ident:
		return vars[e.Name]
	case *ast.CompositeLit:
		out := []string{}
		for _, el := range e.Elts {
			if s, ok := stringValue(el); ok {
				out = append(out, s)
			}
		}
		return out
	case *ast.CallExpr:
		// slices.Concat(a, b, …) of label lists.
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok && isIdent(sel.X, "slices") && sel.Sel.Name == "Concat" {
			var out []string
			for _, a := range e.Args {
				out = append(out, stringSlice(a, vars)...)
			}
			return out
		}
	}
	return nil
}

// stringValue is the value of a string literal, or of literals joined by +.
func stringValue(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		a, ok1 := stringValue(e.X)
		b, ok2 := stringValue(e.Y)
		return a + b, ok1 && ok2 && e.Op == token.ADD
	case *ast.ParenExpr:
		return stringValue(e.X)
	}
	return "", false
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// readConstants returns the string constants of the package in dir whose
// names match name, each with its own comment (above it, or at the end of
// its line); one without is an error.
func readConstants(dir string, name *regexp.Regexp) ([]constant, error) {
	fset := token.NewFileSet()
	files, err := parseDir(fset, dir)
	if err != nil {
		return nil, err
	}
	var out []constant
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !name.MatchString(id.Name) || i >= len(vs.Values) {
						continue
					}
					v, ok := stringValue(vs.Values[i])
					if !ok {
						continue
					}
					doc := vs.Doc.Text()
					if doc == "" {
						doc = vs.Comment.Text()
					}
					if doc == "" {
						return nil, fmt.Errorf("%s: %s has no comment: say what it means where it is declared", fset.Position(id.Pos()), id.Name)
					}
					out = append(out, constant{name: id.Name, value: v, doc: meaning(id.Name, doc), pkg: dir})
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].value < out[j].value })
	return out, nil
}

// readConstantsUnder is readConstants of dir and of every package under it,
// sorted by value as one list.
func readConstantsUnder(dir string, name *regexp.Regexp) ([]constant, error) {
	dirs, err := packageDirs(dir)
	if err != nil {
		return nil, err
	}
	var out []constant
	for _, d := range dirs {
		cs, err := readConstants(d, name)
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].value < out[j].value })
	return out, nil
}

// meaning is a constant's comment as one line, without its name or value
// in front ("EventInjected: the container…" is "the container…").
func meaning(name, doc string) string {
	doc = strings.Join(strings.Fields(doc), " ")
	for _, prefix := range []string{name + ": ", name + " "} {
		if rest, ok := strings.CutPrefix(doc, prefix); ok {
			return rest
		}
	}
	return doc
}

// kindDir is, for one controller, the kinds it runs, the controller
// package its Events come from (with the packages under it: PodBugger's
// incident recorder) and the API package (the newest version) its
// conditions are declared in.
type kindDir struct{ kind, controller, api string }

// apiModule is the import path under which the API packages live.
const apiModule = "github.com/deckhand-dev/deckhand/api/"

// kindDirs reads them from the manager's registry, so that a new kind's
// entry brings its section: the controller package is named after the
// controller; the API package is the one of its hub version (or its only
// one), and the kinds are those that package declares, the one named after
// the controller first.
func kindDirs() ([]kindDir, error) {
	var out []kindDir
	for _, c := range manager.Registry() {
		s := runtime.NewScheme()
		if err := c.AddToScheme(s); err != nil {
			return nil, fmt.Errorf("registering the API of controller %s: %w", c.Name, err)
		}
		byPkg := map[string][]string{}
		hub := ""
		for gvk, typ := range s.AllKnownTypes() {
			if !strings.HasPrefix(typ.PkgPath(), apiModule) || strings.HasSuffix(gvk.Kind, "List") {
				continue
			}
			byPkg[typ.PkgPath()] = append(byPkg[typ.PkgPath()], gvk.Kind)
			if _, ok := reflect.New(typ).Interface().(conversion.Hub); ok {
				hub = typ.PkgPath()
			}
		}
		if hub == "" && len(byPkg) == 1 {
			for pkg := range byPkg {
				hub = pkg
			}
		}
		if hub == "" {
			return nil, fmt.Errorf("controller %s: its API has %d versions and no hub", c.Name, len(byPkg))
		}
		kinds := byPkg[hub]
		slices.SortFunc(kinds, func(a, b string) int {
			return cmp.Or(cmp.Compare(rank(c.Name, a), rank(c.Name, b)), cmp.Compare(a, b))
		})
		out = append(out, kindDir{kind: strings.Join(kinds, " and "), controller: "internal/controller/" + c.Name,
			api: "api/" + strings.TrimPrefix(hub, apiModule)})
	}
	return out, nil
}

// rank puts the kind named after the controller first.
func rank(controller, kind string) int {
	if strings.ToLower(kind) == controller {
		return 0
	}
	return 1
}

var (
	eventConst     = regexp.MustCompile(`^Event[A-Z]`)
	conditionConst = regexp.MustCompile(`^Condition[A-Z]`)
	reasonConst    = regexp.MustCompile(`^Reason[A-Z]`)
)

func metricsPage(ms []metric) []byte {
	var b bytes.Buffer
	b.WriteString(generated)
	b.WriteString("# Metrics\n\nEvery metric the manager exports beside controller-runtime's and Go's, read from where it is declared. [Monitoring](../operations/monitoring.md) says which to alert on and shows the dashboard.\n\n| metric | type | labels | meaning |\n|---|---|---|---|\n")
	for _, m := range ms {
		labels := "—"
		if len(m.labels) > 0 {
			labels = "`" + strings.Join(m.labels, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m.name, m.kind, labels, cell(m.help))
	}
	return b.Bytes()
}

func eventsPage(root string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(generated)
	b.WriteString("# Events and conditions\n\nPer kind, the condition types and reasons its status carries and the Events its controller writes, read from where each is declared.\n")
	dirs, err := kindDirs()
	if err != nil {
		return nil, err
	}
	for _, k := range dirs {
		conds, err := readConstants(filepath.Join(root, k.api), conditionConst)
		if err != nil {
			return nil, err
		}
		reasons, err := readConstants(filepath.Join(root, k.api), reasonConst)
		if err != nil {
			return nil, err
		}
		events, err := readConstantsUnder(filepath.Join(root, k.controller), eventConst)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "\n## %s\n\n### Conditions\n\n| type | meaning |\n|---|---|\n", k.kind)
		for _, c := range conds {
			fmt.Fprintf(&b, "| `%s` | %s |\n", c.value, cell(c.doc))
		}
		b.WriteString("\n### Condition reasons\n\n| reason | meaning |\n|---|---|\n")
		for _, c := range reasons {
			fmt.Fprintf(&b, "| `%s` | %s |\n", c.value, cell(c.doc))
		}
		b.WriteString("\n### Events\n\n| reason | meaning |\n|---|---|\n")
		for _, c := range events {
			fmt.Fprintf(&b, "| `%s` | %s |\n", c.value, cell(c.doc))
		}
	}
	return b.Bytes(), nil
}
