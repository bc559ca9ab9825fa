// Package gitops tests the health contract GitOps tools read from every
// Deckhand kind (docs/operations/gitops.md): kstatus (Flux, kpt, cli-utils) computes
// Current, InProgress or Failed from it; Argo CD runs config/argocd's Lua
// health check, here in the Lua engine Argo CD runs (gopher-lua) with the
// libraries it opens; `kubectl wait --for=condition=Ready` waits for a
// Ready condition of the current generation.
package gitops

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	lua "github.com/yuin/gopher-lua"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// verdict is what each tool makes of one object.
type verdict struct {
	// Kstatus is kstatus' status: Current, InProgress, Failed, ...
	Kstatus status.Status
	// Argo is Argo CD's health: Healthy, Progressing, Degraded, Suspended.
	Argo string
	// Waited is whether `kubectl wait --for=condition=Ready` returns: a
	// Ready condition True, judged at the object's generation.
	Waited bool
	// Message is Argo CD's message, for failures.
	Message string
}

func (v verdict) String() string {
	return fmt.Sprintf("kstatus %s, Argo CD %s (%q), kubectl wait returns: %t", v.Kstatus, v.Argo, v.Message, v.Waited)
}

// Each GitOps tool's reading of a settled, a converging and a stuck object.
var (
	healthy     = verdict{Kstatus: status.CurrentStatus, Argo: "Healthy", Waited: true}
	suspended   = verdict{Kstatus: status.CurrentStatus, Argo: "Suspended", Waited: true}
	progressing = verdict{Kstatus: status.InProgressStatus, Argo: "Progressing", Waited: false}
	degraded    = verdict{Kstatus: status.FailedStatus, Argo: "Degraded", Waited: false}
)

// same compares the tools' readings, not the message.
func (v verdict) same(w verdict) bool {
	return v.Kstatus == w.Kstatus && v.Argo == w.Argo && v.Waited == w.Waited
}

// judge is what kstatus, Argo CD and kubectl wait make of obj.
func judge(t testing.TB, obj client.Object) verdict {
	t.Helper()
	u := toUnstructured(t, obj)
	res, err := statusCompute(u)
	if err != nil {
		t.Fatalf("kstatus: %v", err)
	}
	argo, msg, err := argoHealth(healthScript(t, u), u)
	if err != nil {
		t.Fatalf("Argo CD health check: %v", err)
	}
	return verdict{Kstatus: res, Argo: argo, Message: msg, Waited: waitReturns(u)}
}

func statusCompute(u *unstructured.Unstructured) (status.Status, error) {
	res, err := status.Compute(u)
	if err != nil {
		return "", err
	}
	return res.Status, nil
}

func toUnstructured(t testing.TB, obj client.Object) *unstructured.Unstructured {
	t.Helper()
	gvk, err := apiutil.GVKForObject(obj, manager.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u
}

// waitReturns is kubectl wait --for=condition=Ready's test: the condition
// is True and, when it says which generation it judged, judged this one.
func waitReturns(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != "Ready" {
			continue
		}
		gen, found, _ := unstructured.NestedInt64(m, "observedGeneration")
		return m["status"] == string(metav1.ConditionTrue) && (!found || gen == u.GetGeneration())
	}
	return false
}

// healthScript is the health check Argo CD runs for u's kind once
// config/argocd's patch is in its argocd-cm.
func healthScript(t testing.TB, u *unstructured.Unstructured) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "config", "argocd", "argocd-cm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	if err := yaml.Unmarshal(b, cm); err != nil {
		t.Fatal(err)
	}
	gvk := u.GroupVersionKind()
	key := "resource.customizations.health." + gvk.Group + "_" + gvk.Kind
	script, ok := cm.Data[key]
	if !ok {
		t.Fatalf("config/argocd/argocd-cm.yaml has no %s: Argo CD would not know the health of a %s", key, gvk.Kind)
	}
	return script
}

// argoHealth runs a health check as Argo CD does (util/lua): a Lua state
// with only the base, table, string and math libraries, the object as the
// global obj (decoded from its JSON), and a table with status and message
// as the result.
func argoHealth(script string, u *unstructured.Unstructured) (health, message string, err error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		l.Push(l.NewFunction(lib.open))
		l.Push(lua.LString(lib.name))
		l.Call(1, 0)
	}
	b, err := json.Marshal(u.Object)
	if err != nil {
		return "", "", err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return "", "", err
	}
	l.SetGlobal("obj", toLua(l, v))
	if err := l.DoString(script); err != nil {
		return "", "", err
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return "", "", fmt.Errorf("the script returned %s, not a table", l.Get(-1).Type())
	}
	health, message = lua.LVAsString(ret.RawGetString("status")), lua.LVAsString(ret.RawGetString("message"))
	switch health {
	case "Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown":
		return health, message, nil
	}
	return "", "", fmt.Errorf("the script returned health %q, which Argo CD refuses", health)
}

// toLua is a JSON value as Lua sees it in Argo CD: objects and arrays as
// tables (arrays from 1), numbers, strings, booleans, nil.
func toLua(l *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case map[string]any:
		t := l.NewTable()
		for k, e := range x {
			t.RawSetString(k, toLua(l, e))
		}
		return t
	case []any:
		t := l.NewTable()
		for i, e := range x {
			t.RawSetInt(i+1, toLua(l, e))
		}
		return t
	case float64:
		return lua.LNumber(x)
	case string:
		return lua.LString(x)
	case bool:
		return lua.LBool(x)
	}
	return lua.LNil
}

// conditionGenerations checks what kubectl wait and kstatus rely on: every
// condition carries the generation it judged, and status.observedGeneration
// is set.
func conditionGenerations(t testing.TB, conds []metav1.Condition, observed int64) {
	t.Helper()
	if observed == 0 {
		t.Errorf("status.observedGeneration is not set")
	}
	for _, c := range conds {
		if c.ObservedGeneration != observed {
			t.Errorf("condition %s judged generation %d, status.observedGeneration is %d", c.Type, c.ObservedGeneration, observed)
		}
	}
	if apimeta.FindStatusCondition(conds, "Ready") == nil {
		t.Errorf("no Ready condition: kubectl wait --for=condition=Ready would wait for ever")
	}
}
