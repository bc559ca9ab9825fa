package controller_test

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"iter"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// The rules of the controller contract that names and files cannot show,
// checked on the type-checked packages (docs/development/architecture.md,
// "The shape of a controller package"):
//
//   - ControllerName is the package's name;
//   - status and health are pure: computeStatus, health and every
//     <name>Condition, with every function of the package they call or take
//     as a value, read no clock and call no client. A clock is read by using
//     (calling, or taking as a value) time.Now, Since, Until, After, Tick,
//     NewTimer, NewTicker, Sleep or AfterFunc, or metav1.Now or NowMicro, or
//     by calling a func value (a variable, field or parameter, such as a
//     reconciler's Now; not a func literal called where it is written,
//     whose body is checked) or an interface method that takes nothing and
//     returns a time.Time, metav1.Time or metav1.MicroTime; a client is
//     called by using a method of controller-runtime's client package;
//   - every struct holding a *status.Writer writes its status through it;
//   - no package-level variable is written after its declaration (no
//     package-level mutable state: a setting is a field a constructor sets):
//     assigned (whole, an element or a field, also as a range loop's key or
//     value), incremented, its address taken, a pointer-receiver method
//     called on it, or changed in place by delete, clear, copy or one of
//     the sort, slices and maps functions named in inPlace (Sort, Reverse,
//     maps.Copy, …), anywhere in the package's non-test files: in
//     functions, and in the initialisers of var declarations (a closure
//     there writes when it is called); Prometheus collectors and compiled
//     regular expressions are exempt;
//   - an exported function, or exported method of an exported type, takes
//     and returns no unexported type of its own package, bare or inside
//     another: behind a pointer, as the element of a slice, array, map or
//     channel or a map's key, as a func's parameter or result, as a field
//     of an anonymous struct, a method or embedded type of an anonymous
//     interface, or as a generic type's argument (a constructor a caller
//     outside the package cannot call is not one).
const (
	ruleName      = "ControllerName"
	rulePure      = "pure"
	ruleWriter    = "status writer"
	ruleGlobal    = "package state"
	ruleSignature = "exported signature"
)

// violation is one broken rule, with where.
type violation struct {
	rule, where, what string
}

func (v violation) String() string { return fmt.Sprintf("%s: %s: %s", v.where, v.rule, v.what) }

// TestTheContractHoldsByType checks every controller package against the
// typed rules.
func TestTheContractHoldsByType(t *testing.T) {
	pkgs := loadControllers(t, nil)
	if len(pkgs) < 4 {
		t.Fatalf("loaded %d controller packages, want at least the four kinds", len(pkgs))
	}
	for _, p := range pkgs {
		t.Run(p.Name, func(t *testing.T) {
			for _, v := range contractViolations(p) {
				t.Error(v)
			}
		})
	}
}

// TestTheControllersPartsHoldByType checks the packages a kind's
// controller is split into (PodBugger's incident recorder,
// podbugger/incident, and what it shares with the PodBugger reconciler,
// podbugger/record) against the typed rules but the name: ControllerName
// names a kind, and each part runs as part of its kind's controller.
func TestTheControllersPartsHoldByType(t *testing.T) {
	pkgs := loadSubPackages(t)
	if !slices.ContainsFunc(pkgs, func(p *packages.Package) bool { return p.Name == "incident" }) {
		t.Fatalf("loaded %d parts of controllers, want podbugger/incident among them", len(pkgs))
	}
	for _, p := range pkgs {
		t.Run(strings.TrimPrefix(p.PkgPath, controllerPrefix), func(t *testing.T) {
			for _, v := range partViolations(p) {
				t.Error(v)
			}
		})
	}
}

// TestTheContractCheckFindsEachPlantedViolation plants one violation of each
// rule in a copy of the podset package (a file added through go/packages'
// overlay) and checks each is named, so that no rule can pass by being
// unable to fail.
func TestTheContractCheckFindsEachPlantedViolation(t *testing.T) {
	const planted = `package podset

import (
	"context"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/status"
)

var plantedSetting = 1

func plantedSet(n int) { plantedSetting = n }

type plantedReconciler struct {
	status *status.Writer[appsv1beta1.PodSetStatus]
	Now    func() time.Time
}

type plantedDependency struct{}

func NewPlantedReconciler(d *plantedDependency) *plantedReconciler { return &plantedReconciler{} }

func plantedHelper() time.Time { return time.Now() }

func plantedCondition(c client.Reader) bool {
	_ = c.Get(context.Background(), client.ObjectKey{}, &appsv1beta1.PodSet{})
	return plantedHelper().IsZero()
}

// A clock read through a value, not a call of time.Now by name.

func plantedNowValueCondition() bool {
	now := time.Now
	return now().IsZero()
}

func plantedMetaNowCondition() bool { return metav1.Now().Time.IsZero() }

func plantedNewTimeCondition() bool { return metav1.NewTime(time.Now()).Time.IsZero() }

func plantedFieldClockCondition(r *plantedReconciler) bool { return r.Now().IsZero() }

func plantedElapsed(t time.Time) time.Duration { return time.Since(t) }

func plantedHelperValueCondition(t time.Time) bool {
	elapsed := plantedElapsed
	return elapsed(t) > 0
}

// Pure, though shaped like a clock read: a method of time.Time, and a
// func literal called where it is written.
func plantedPureCondition(now time.Time) bool {
	return func() time.Time { return now.UTC() }().IsZero()
}

// Package state written inside a closure of a var declaration.

var plantedCounter int

var plantedBump = func() { plantedCounter++ }

var plantedLocalCounter int

func plantedLocal() {
	var bump = func() { plantedLocalCounter++ }
	bump()
}

// Package state changed other than by assigning the variable.

var (
	plantedIndex  = map[string]int{}
	plantedSeen   = map[string]bool{}
	plantedByName = map[string]int{}
	plantedOrder  []string
	plantedBuf    = make([]byte, 8)
	plantedLast   string
)

func plantedForget(k string)      { delete(plantedIndex, k) }
func plantedReset()               { clear(plantedSeen) }
func plantedName(k string, v int) { plantedByName[k] = v }
func plantedSort()                { slices.Sort(plantedOrder) }
func plantedFill(b []byte)        { copy(plantedBuf, b) }
func plantedRange(names []string) {
	for _, plantedLast = range names {
	}
}

// Unexported types of the package inside exported signatures.

func PlantedSlice(ds []plantedDependency)       {}
func PlantedMap() map[string]*plantedDependency { return nil }
func PlantedFunc(f func(plantedDependency))     {}
func PlantedChan() <-chan []plantedDependency   { return nil }
`
	dir, err := filepath.Abs("podset")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := loadControllers(t, map[string][]byte{filepath.Join(dir, "zz_planted.go"): []byte(planted)}, "./podset")
	if len(pkgs) != 1 {
		t.Fatalf("loaded %d packages, want podset", len(pkgs))
	}
	found := map[string][]string{}
	for _, v := range contractViolations(pkgs[0]) {
		found[v.rule] = append(found[v.rule], v.what)
	}
	for _, want := range []struct{ rule, names string }{
		{rulePure, "time.Now"},
		{ruleWriter, "plantedReconciler"},
		{ruleGlobal, "plantedSetting"},
		{ruleSignature, "plantedDependency"},
		// Clocks read through values.
		{rulePure, "plantedNowValueCondition"},
		{rulePure, "plantedMetaNowCondition"},
		{rulePure, "plantedNewTimeCondition"},
		{rulePure, "plantedFieldClockCondition"},
		{rulePure, "plantedHelperValueCondition → plantedElapsed"},
		// Writes in closures of var declarations.
		{ruleGlobal, "plantedCounter"},
		{ruleGlobal, "plantedLocalCounter"},
		// Mutations that are not assignments of the variable.
		{ruleGlobal, "plantedIndex"},
		{ruleGlobal, "plantedSeen"},
		{ruleGlobal, "plantedByName"},
		{ruleGlobal, "plantedOrder"},
		{ruleGlobal, "plantedBuf"},
		{ruleGlobal, "plantedLast"},
		// Unexported types inside exported signatures.
		{ruleSignature, "PlantedSlice"},
		{ruleSignature, "PlantedMap"},
		{ruleSignature, "PlantedFunc"},
		{ruleSignature, "PlantedChan"},
	} {
		if !slices.ContainsFunc(found[want.rule], func(s string) bool { return strings.Contains(s, want.names) }) {
			t.Errorf("rule %q did not name %s in the planted file", want.rule, want.names)
		}
	}
	for rule, what := range found {
		t.Logf("rule %q found %q", rule, what)
	}
	if slices.ContainsFunc(found[rulePure], func(s string) bool { return strings.HasPrefix(s, "plantedPureCondition") }) {
		t.Errorf("rule %q named plantedPureCondition, which reads no clock; it found %q", rulePure, found[rulePure])
	}
	if !slices.ContainsFunc(found[rulePure], func(s string) bool { return strings.Contains(s, "Get") }) {
		t.Errorf("rule %q did not name the client call in plantedCondition; it found %q", rulePure, found[rulePure])
	}
}

// TestTheContractCheckFindsAWrongControllerName plants a ControllerName
// that is not the package's name.
func TestTheContractCheckFindsAWrongControllerName(t *testing.T) {
	p := &packages.Package{Name: "podset", Types: types.NewPackage("x/podset", "podset")}
	p.Types.Scope().Insert(types.NewConst(token.NoPos, p.Types, "ControllerName", types.Typ[types.UntypedString], constant.MakeString("pod-set")))
	vs := nameViolations(p)
	if len(vs) != 1 || vs[0].rule != ruleName {
		t.Fatalf("want one %q violation for ControllerName pod-set, got %v", ruleName, vs)
	}
}

// loadControllers type-checks the controller packages (patterns, default
// every directory of internal/controller but the policy packages), with
// overlay's files added.
func loadControllers(t *testing.T, overlay map[string][]byte, patterns ...string) []*packages.Package {
	t.Helper()
	var out []*packages.Package
	for _, p := range loadPackages(t, overlay, patterns...) {
		// The controller packages themselves: internal/controller/<kind>.
		if rel := strings.TrimPrefix(p.PkgPath, controllerPrefix); rel != p.PkgPath && !strings.Contains(rel, "/") {
			out = append(out, p)
		}
	}
	return out
}

const controllerPrefix = "github.com/deckhand-dev/deckhand/internal/controller/"

// loadSubPackages type-checks the packages a kind's controller is split
// into (internal/controller/<kind>/<part>), but its policy package, which
// its webhook shares and which runs no controller, and the helpers its
// tests share (<kind>test), which only tests import.
func loadSubPackages(t *testing.T) []*packages.Package {
	t.Helper()
	var out []*packages.Package
	for _, p := range loadPackages(t, nil) {
		rel := strings.TrimPrefix(p.PkgPath, controllerPrefix)
		kind, _, nested := strings.Cut(rel, "/")
		if rel != p.PkgPath && nested && p.Name != "policy" && p.Name != kind+"test" {
			out = append(out, p)
		}
	}
	return out
}

// loadPackages type-checks the packages of patterns (default every package
// under internal/controller), with overlay's files added.
func loadPackages(t *testing.T, overlay map[string][]byte, patterns ...string) []*packages.Package {
	t.Helper()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	cfg := &packages.Config{
		Mode:    packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo,
		Overlay: overlay,
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Fatalf("%s: %v", p.PkgPath, e)
		}
	}
	return pkgs
}

// contractViolations lists every typed rule p breaks, in its non-test files.
func contractViolations(p *packages.Package) []violation {
	return append(nameViolations(p), partViolations(p)...)
}

// partViolations lists every typed rule but the name that p breaks: the
// rules a part of a kind's controller keeps too.
func partViolations(p *packages.Package) []violation {
	vs := purityViolations(p)
	vs = append(vs, writerViolations(p)...)
	vs = append(vs, globalViolations(p)...)
	return append(vs, signatureViolations(p)...)
}

func nameViolations(p *packages.Package) []violation {
	c, ok := p.Types.Scope().Lookup("ControllerName").(*types.Const)
	if !ok {
		return []violation{{ruleName, p.Name, "no ControllerName constant"}}
	}
	if c.Val().Kind() != constant.String || constant.StringVal(c.Val()) != p.Name {
		return []violation{{ruleName, p.Name, fmt.Sprintf("ControllerName is %s, want %q (the package's name)", c.Val(), p.Name)}}
	}
	return nil
}

// funcs maps each package-level function and method of p's non-test files
// to its declaration.
func funcs(p *packages.Package) map[*types.Func]*ast.FuncDecl {
	out := map[*types.Func]*ast.FuncDecl{}
	for _, f := range p.Syntax {
		if strings.HasSuffix(p.Fset.File(f.Pos()).Name(), "_test.go") {
			continue
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				if fn, ok := p.TypesInfo.Defs[fd.Name].(*types.Func); ok {
					out[fn] = fd
				}
			}
		}
	}
	return out
}

// isStatusFunc says whether a package-level function is one of the pure
// status and health functions.
func isStatusFunc(fd *ast.FuncDecl) bool {
	n := fd.Name.Name
	return fd.Recv == nil && (n == "computeStatus" || n == "health" || (strings.HasSuffix(n, "Condition") && n != "Condition"))
}

// clockFuncs are the functions, by package, that read the clock.
var clockFuncs = map[string][]string{
	"time":                                 {"Now", "Since", "Until", "After", "Tick", "NewTimer", "NewTicker", "Sleep", "AfterFunc"},
	"k8s.io/apimachinery/pkg/apis/meta/v1": {"Now", "NowMicro"},
}

// importName is how the packages of clockFuncs are imported.
var importName = map[string]string{"time": "time", "k8s.io/apimachinery/pkg/apis/meta/v1": "metav1"}

// purityViolations follows every status and health function, and the
// functions of the package they use (called or taken as a value), and names
// each clock read and client call. A clock is read by using a clock
// function (called, or taken as a value to call later) or by calling a
// func value or an interface method that takes nothing and returns a time:
// a status function takes now, not a way to ask for it.
func purityViolations(p *packages.Package) []violation {
	decls := funcs(p)
	var vs []violation
	for fn, fd := range decls {
		if !isStatusFunc(fd) {
			continue
		}
		seen := map[*types.Func]bool{}
		var walk func(f *types.Func, path string)
		walk = func(f *types.Func, path string) {
			d, ok := decls[f]
			if !ok || seen[f] {
				return
			}
			seen[f] = true
			ast.Inspect(d.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.Ident:
					used, ok := p.TypesInfo.Uses[n].(*types.Func)
					if !ok || used.Pkg() == nil {
						return true
					}
					used = used.Origin()
					switch pkg := used.Pkg().Path(); {
					case slices.Contains(clockFuncs[pkg], used.Name()) && used.Signature().Recv() == nil:
						vs = append(vs, violation{rulePure, p.Fset.Position(n.Pos()).String(), fmt.Sprintf("%s uses %s.%s: a status function takes now", path, importName[pkg], used.Name())})
					case pkg == "sigs.k8s.io/controller-runtime/pkg/client" && used.Signature().Recv() != nil:
						vs = append(vs, violation{rulePure, p.Fset.Position(n.Pos()).String(), fmt.Sprintf("%s calls the client (%s): a status function takes what was observed", path, used.Name())})
					case pkg == p.PkgPath:
						walk(used, path+" → "+used.Name())
					}
				case *ast.CallExpr:
					if asksTheTime(p.TypesInfo, n) {
						vs = append(vs, violation{rulePure, p.Fset.Position(n.Pos()).String(), fmt.Sprintf("%s calls %s, a clock (a func value or interface method returning a time): a status function takes now", path, types.ExprString(n.Fun))})
					}
				}
				return true
			})
		}
		walk(fn, fn.Name())
	}
	return vs
}

// asksTheTime says whether call calls a func value (a variable, a field, a
// parameter, a call's result; not a func literal called where it is
// written, whose body is walked) or an interface method that takes nothing
// and returns a time: a clock, whatever its name. A declared function or a
// concrete method is not one by its shape alone (time.Time's UTC and Local
// have it); the clock functions are named in clockFuncs and the package's
// own are followed.
func asksTheTime(info *types.Info, call *ast.CallExpr) bool {
	if _, lit := ast.Unparen(call.Fun).(*ast.FuncLit); lit {
		return false // its body is walked with the rest
	}
	tv, ok := info.Types[call.Fun]
	if !ok || tv.IsType() || tv.IsBuiltin() {
		return false
	}
	sig, ok := tv.Type.Underlying().(*types.Signature)
	if !ok || sig.Params().Len() != 0 || sig.Results().Len() != 1 || !isTime(sig.Results().At(0).Type()) {
		return false
	}
	if f := typeutilCallee(info, call); f != nil {
		recv := f.Signature().Recv()
		return recv != nil && types.IsInterface(recv.Type())
	}
	return true
}

// isTime says whether t is a time.Time, a metav1.Time or metav1.MicroTime,
// or a pointer to one.
func isTime(t types.Type) bool {
	named, ok := derefNamed(types.Unalias(t))
	if !ok || named.Obj().Pkg() == nil {
		return false
	}
	switch named.Obj().Pkg().Path() {
	case "time":
		return named.Obj().Name() == "Time"
	case "k8s.io/apimachinery/pkg/apis/meta/v1":
		return named.Obj().Name() == "Time" || named.Obj().Name() == "MicroTime"
	}
	return false
}

// typeutilCallee is the function or method a call calls, if static.
func typeutilCallee(info *types.Info, call *ast.CallExpr) *types.Func {
	var id *ast.Ident
	switch fun := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		id = fun
	case *ast.SelectorExpr:
		id = fun.Sel
	case *ast.IndexExpr: // a generic function instantiated explicitly
		if sel, ok := fun.X.(*ast.SelectorExpr); ok {
			id = sel.Sel
		} else if i, ok := fun.X.(*ast.Ident); ok {
			id = i
		}
	}
	if id == nil {
		return nil
	}
	f, _ := info.Uses[id].(*types.Func)
	if f != nil {
		return f.Origin()
	}
	return nil
}

// writerViolations names every struct type with a *status.Writer field
// whose field is never called Write on.
func writerViolations(p *packages.Package) []violation {
	held := map[*types.Var]string{} // the Writer fields, with their struct's name
	for _, name := range p.Types.Scope().Names() {
		tn, ok := p.Types.Scope().Lookup(name).(*types.TypeName)
		if !ok {
			continue
		}
		st, ok := tn.Type().Underlying().(*types.Struct)
		if !ok {
			continue
		}
		for i := range st.NumFields() {
			if isStatusWriter(st.Field(i).Type()) {
				held[st.Field(i)] = name
			}
		}
	}
	written := map[*types.Var]bool{}
	for sel, s := range p.TypesInfo.Selections {
		if s.Kind() != types.MethodVal || s.Obj().Name() != "Write" {
			continue
		}
		if inner, ok := ast.Unparen(sel.X).(*ast.SelectorExpr); ok {
			if v, ok := p.TypesInfo.Uses[inner.Sel].(*types.Var); ok && v.IsField() {
				written[v.Origin()] = true
			}
		}
	}
	var vs []violation
	for field, owner := range held {
		if !written[field] {
			vs = append(vs, violation{ruleWriter, p.Fset.Position(field.Pos()).String(), fmt.Sprintf("%s holds a *status.Writer (%s) and never writes through it", owner, field.Name())})
		}
	}
	return vs
}

func isStatusWriter(t types.Type) bool {
	ptr, ok := t.(*types.Pointer)
	if !ok {
		return false
	}
	named, ok := ptr.Elem().(*types.Named)
	return ok && named.Obj().Name() == "Writer" && named.Obj().Pkg() != nil &&
		named.Obj().Pkg().Path() == "github.com/deckhand-dev/deckhand/internal/status"
}

// globalViolations names every package-level variable written after its
// declaration: assigned (whole, an element or a field, also as a range
// loop's key or value), incremented, its address taken, a pointer-receiver
// method called on it, or changed by delete, clear, copy or a sort, slices
// or maps function that changes its first argument in place (inPlace).
func globalViolations(p *packages.Package) []violation {
	var vs []violation
	for v, at := range globalWrites(p) {
		if immutableGlobal(v) {
			continue
		}
		vs = append(vs, violation{ruleGlobal, p.Fset.Position(at).String(), fmt.Sprintf("package-level %s is written after its declaration: make it a field a constructor sets", v.Name())})
	}
	return vs
}

// globalOf is the package-level variable e is, or is part of (an element,
// a field, what it points to), if any.
func globalOf(p *packages.Package, e ast.Expr) *types.Var {
	for {
		switch x := ast.Unparen(e).(type) {
		case *ast.Ident:
			v, ok := p.TypesInfo.Uses[x].(*types.Var)
			if ok && v.Parent() == p.Types.Scope() {
				return v
			}
			return nil
		case *ast.IndexExpr:
			e = x.X
		case *ast.SelectorExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		default:
			return nil
		}
	}
}

// globalWrites maps each package-level variable of p's non-test files that
// is written after its declaration to where it first is.
func globalWrites(p *packages.Package) map[*types.Var]token.Pos {
	written := map[*types.Var]token.Pos{}
	for _, f := range p.Syntax {
		if strings.HasSuffix(p.Fset.File(f.Pos()).Name(), "_test.go") {
			continue
		}
		// Every node is looked at, var declarations too: what one declares
		// is never among what a node writes, but its initialiser is code
		// like any other (a closure in it writes when it is called, an
		// address taken there is taken).
		ast.Inspect(f, func(n ast.Node) bool {
			for _, e := range writtenBy(p.TypesInfo, n) {
				if v := globalOf(p, e); v != nil {
					if _, ok := written[v]; !ok {
						written[v] = n.Pos()
					}
				}
			}
			return true
		})
	}
	return written
}

// writtenBy lists what node n writes, or may through a pointer: the left
// of an assignment, what is incremented, a range loop's key and value
// assigned, what an address is taken of, what a pointer-receiver method is
// selected on, and the first argument of a call that changes it in place.
func writtenBy(info *types.Info, n ast.Node) []ast.Expr {
	switch n := n.(type) {
	case *ast.AssignStmt:
		if n.Tok != token.DEFINE {
			return n.Lhs
		}
	case *ast.IncDecStmt:
		return []ast.Expr{n.X}
	case *ast.RangeStmt:
		if n.Tok == token.ASSIGN {
			return slices.DeleteFunc([]ast.Expr{n.Key, n.Value}, func(e ast.Expr) bool { return e == nil })
		}
	case *ast.CallExpr:
		if len(n.Args) > 0 && mutatesFirstArgument(info, n) {
			return n.Args[:1]
		}
	case *ast.UnaryExpr:
		if n.Op == token.AND {
			return []ast.Expr{n.X}
		}
	case *ast.SelectorExpr:
		if s := info.Selections[n]; s != nil && s.Kind() == types.MethodVal {
			if _, ptr := s.Obj().(*types.Func).Signature().Recv().Type().(*types.Pointer); ptr {
				return []ast.Expr{n.X}
			}
		}
	}
	return nil
}

// inPlace are the functions of the standard library, by package, that
// change what their first argument refers to (delete, clear and copy are
// the builtins').
var inPlace = map[string][]string{
	"sort":   {"Strings", "Ints", "Float64s", "Slice", "SliceStable", "Sort", "Stable"},
	"slices": {"Sort", "SortFunc", "SortStableFunc", "Reverse", "Delete", "DeleteFunc", "Compact", "CompactFunc", "Replace"},
	"maps":   {"Copy", "DeleteFunc"},
}

// mutatesFirstArgument says whether call changes the map, slice or value
// its first argument refers to: the builtins delete, clear and copy, or one
// of inPlace.
func mutatesFirstArgument(info *types.Info, call *ast.CallExpr) bool {
	var id *ast.Ident
	switch fun := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		id = fun
	case *ast.SelectorExpr:
		id = fun.Sel
	case *ast.IndexExpr: // an explicitly instantiated slices.SortFunc[…]
		if sel, ok := fun.X.(*ast.SelectorExpr); ok {
			id = sel.Sel
		}
	case *ast.IndexListExpr:
		if sel, ok := fun.X.(*ast.SelectorExpr); ok {
			id = sel.Sel
		}
	}
	if id == nil {
		return false
	}
	switch obj := info.Uses[id].(type) {
	case *types.Builtin:
		return obj.Name() == "delete" || obj.Name() == "clear" || obj.Name() == "copy"
	case *types.Func:
		return obj.Pkg() != nil && obj.Signature().Recv() == nil && slices.Contains(inPlace[obj.Pkg().Path()], obj.Name())
	}
	return false
}

// signatureViolations names every exported function or method of an
// exported type whose parameters or results use an unexported type of the
// package, bare or inside another (unexportedIn).
func signatureViolations(p *packages.Package) []violation {
	var vs []violation
	for fn, fd := range funcs(p) {
		if !fn.Exported() {
			continue
		}
		sig := fn.Signature()
		if r := sig.Recv(); r != nil {
			if named, ok := derefNamed(r.Type()); !ok || !named.Obj().Exported() {
				continue
			}
		}
		for _, tuple := range []*types.Tuple{sig.Params(), sig.Results()} {
			for v := range tuple.Variables() {
				if tn := unexportedIn(v.Type(), p.Types); tn != nil {
					in := ""
					if named, ok := derefNamed(v.Type()); !ok || named.Obj() != tn {
						in = " (in " + types.TypeString(v.Type(), types.RelativeTo(p.Types)) + ")"
					}
					vs = append(vs, violation{ruleSignature, p.Fset.Position(fd.Pos()).String(), fmt.Sprintf("%s takes or returns %s%s, unexported: a caller outside the package cannot supply it", fn.Name(), tn.Name(), in)})
				}
			}
		}
	}
	return vs
}

// unexportedIn is the first unexported type of pkg that t is or is built
// from: the element of a pointer, slice, array or channel, a map's key or
// element, a func's parameter or result, an anonymous struct's field, an
// anonymous interface's method or embedded type, or a type argument of a
// generic type. A named type's own definition is not looked into: a caller
// needs only its name.
func unexportedIn(t types.Type, pkg *types.Package) *types.TypeName {
	if named, ok := types.Unalias(t).(*types.Named); ok && named.Obj().Pkg() == pkg && !named.Obj().Exported() {
		return named.Obj()
	}
	for _, part := range typeParts(t) {
		if tn := unexportedIn(part, pkg); tn != nil {
			return tn
		}
	}
	return nil
}

// typeParts are the types t is built from, as unexportedIn reads them.
func typeParts(t types.Type) []types.Type {
	var parts []types.Type
	vars := func(vs iter.Seq[*types.Var]) {
		for v := range vs {
			parts = append(parts, v.Type())
		}
	}
	switch t := types.Unalias(t).(type) {
	case *types.Named:
		parts = slices.Collect(t.TypeArgs().Types())
	case *types.Map:
		parts = []types.Type{t.Key(), t.Elem()}
	case interface{ Elem() types.Type }: // pointer, slice, array, channel
		parts = []types.Type{t.Elem()}
	case *types.Signature:
		vars(t.Params().Variables())
		vars(t.Results().Variables())
	case *types.Struct:
		vars(t.Fields())
	case *types.Interface:
		for m := range t.ExplicitMethods() {
			parts = append(parts, m.Type())
		}
		parts = append(parts, slices.Collect(t.EmbeddedTypes())...)
	}
	return parts
}

// immutableGlobal says whether a package-level variable is one of the two
// kinds whose pointer methods change nothing a reconciler reads: a
// Prometheus collector (the metrics registry is process-wide by design,
// and its series are removed with their objects) and a compiled regular
// expression.
func immutableGlobal(v *types.Var) bool {
	named, ok := derefNamed(v.Type())
	if !ok || named.Obj().Pkg() == nil {
		return false
	}
	switch named.Obj().Pkg().Path() {
	case "github.com/prometheus/client_golang/prometheus":
		return true
	case "regexp":
		return named.Obj().Name() == "Regexp"
	}
	return false
}

func derefNamed(t types.Type) (*types.Named, bool) {
	if ptr, ok := t.(*types.Pointer); ok {
		t = ptr.Elem()
	}
	n, ok := t.(*types.Named)
	return n, ok
}
