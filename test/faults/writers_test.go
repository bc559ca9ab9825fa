//go:build faults

package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	jobwatchercontroller "github.com/deckhand-dev/deckhand/internal/controller/jobwatcher"
	modelboxcontroller "github.com/deckhand-dev/deckhand/internal/controller/modelbox"
	podbuggercontroller "github.com/deckhand-dev/deckhand/internal/controller/podbugger"
	podsetcontroller "github.com/deckhand-dev/deckhand/internal/controller/podset"
	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// The second-status-writer invariant.
const checkStatusRestored = "another writer's status converges back to the computed one"

// restoreBound is how long a controller may take to put its computed status
// back over another writer's on a quiet object.
const restoreBound = 10 * time.Second

// writerCase is one object whose status a second writer overwrites.
type writerCase struct {
	kind        string
	controllers []string
	// start creates the object (and what it needs) while the manager runs,
	// and returns it with, if any, a status an older leader computed before
	// the object's last change (its late write) and the failure records
	// (UID to Job name) the status must keep.
	start func(t *testing.T) (obj client.Object, early map[string]any, records map[types.UID]string)
}

// registeredWriterCases are the cases of every kind; a kind's file adds its
// own with writerCasesOf in an init function, and secondStatusWriter fails
// naming a controller of the registry that has none.
var registeredWriterCases []writerCase

// writerCasesOf registers cases of the second-status-writer fault.
func writerCasesOf(cases ...writerCase) {
	registeredWriterCases = append(registeredWriterCases, cases...)
}

// writerCases are the registered cases in the registry's order of their
// controllers.
func writerCases() []writerCase {
	known := manager.KnownControllers()
	out := slices.Clone(registeredWriterCases)
	slices.SortStableFunc(out, func(a, b writerCase) int {
		return slices.Index(known, a.controllers[0]) - slices.Index(known, b.controllers[0])
	})
	return out
}

func init() {
	writerCasesOf(
		writerCase{kind: "PodSet", controllers: []string{podsetcontroller.ControllerName},
			start: func(t *testing.T) (client.Object, map[string]any, map[types.UID]string) {
				set := &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace(t), Name: podSetName},
					Spec: appsv1beta1.PodSetSpec{Replicas: 2, Template: template()}}
				env.Create(t, set)
				return set, nil, nil
			}},
		writerCase{kind: "JobWatcher", controllers: []string{jobwatchercontroller.ControllerName},
			start: func(t *testing.T) (client.Object, map[string]any, map[types.UID]string) {
				ctx := context.Background()
				ns := env.Namespace(t)
				w := &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}}
				w.Spec.TTLSecondsAfterFailed = ptr.To[int32](0)
				env.Create(t, w)
				waitFor(t, "the watcher in effect", func() error { return inEffect(ctx, w) })
				early := statusOf(t, w) // before the failed Job: no record
				job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "etl"},
					Spec: batchv1.JobSpec{Template: *template()}}
				job.Spec.Template.Spec.RestartPolicy = "Never"
				job.Spec.Template.Labels = nil
				env.Create(t, job)
				finish(t, job, batchv1.JobFailed, time.Now().Add(-time.Minute))
				records := map[types.UID]string{job.UID: job.Name}
				waitFor(t, "the failed Job's record", func() error { return recordsHeld(ctx, []client.Object{w}, records) })
				return w, early, records
			}},
		writerCase{kind: "PodBugger", controllers: []string{podbuggercontroller.ControllerName},
			start: func(t *testing.T) (client.Object, map[string]any, map[types.UID]string) {
				ns := env.NamespaceWithLabels(t, map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})
				pb := &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podBuggerName},
					Spec: debugv1beta1.PodBuggerSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
						Image: podBuggerImage, MaxPods: maxPods}}
				env.Create(t, pb)
				return pb, nil, nil
			}},
		writerCase{kind: "ModelBox", controllers: []string{modelboxcontroller.ControllerName},
			start: func(t *testing.T) (client.Object, map[string]any, map[types.UID]string) {
				box := &modelv1.ModelBox{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace(t), Name: "llm"},
					Spec: modelv1.ModelBoxSpec{Image: "busybox:1", Replicas: ptr.To[int32](1), Ports: []modelv1.ServicePort{{Port: 8080}}}}
				env.Create(t, box)
				return box, nil, nil
			}},
	)
}

// secondStatusWriter runs every kind's case with the manager running:
// another writer replaces the computed status of a quiet object with a
// forged one (a user's kubectl edit --subresource=status), then with one
// computed before the object's last change (an older leader's late
// write); each time the computed status must be back within restoreBound,
// with every failure record.
func secondStatusWriter(t *testing.T) {
	for _, name := range manager.KnownControllers() {
		if !slices.ContainsFunc(writerCases(), func(c writerCase) bool { return slices.Contains(c.controllers, name) }) {
			t.Errorf("controller %q of the registry has no second-status-writer case: register one with writerCasesOf", name)
		}
	}
	for _, c := range writerCases() {
		if filter := os.Getenv("FAULTS_SCENARIO"); filter != "" && !strings.Contains(c.kind+" status", filter) {
			continue
		}
		t.Run(c.kind, func(t *testing.T) {
			began := time.Now()
			vs := runSecondWriter(t, c, true, restoreBound)
			for _, v := range vs {
				t.Errorf("violated: %s", v)
			}
			record(result{scenario: c.kind + " status", faults: "second status writer (user edit, old leader's late write)",
				violations: vs, took: time.Since(began)})
		})
	}
}

// runSecondWriter runs one case; without keepManager the manager stops
// before the other writer writes (the self-test: nothing puts the status
// back).
func runSecondWriter(t *testing.T, c writerCase, keepManager bool, bound time.Duration) []violation {
	ctx := context.Background()
	f := &fixture{t: t, opts: env.ManagerOptions()}
	f.opts.Controllers = c.controllers
	f.opts.PodBuggerAllowedImages = []string{"docker.io/library/busybox:*"}
	stop := f.startPlain()
	defer func() { stop() }()
	obj, early, records := c.start(t)
	computed := quietStatus(t, obj)
	if !keepManager {
		stop()
		stop = func() {}
	}

	writes := []struct {
		what   string
		status map[string]any
	}{{"a user's edit", forge(computed)}}
	if early != nil {
		writes = append(writes, struct {
			what   string
			status map[string]any
		}{"an older leader's late write", early})
	}
	for _, w := range writes {
		writeStatus(t, obj, w.status)
		deadline := time.Now().Add(bound)
		var got map[string]any
		for {
			got = statusOf(t, obj)
			if equality.Semantic.DeepEqual(comparable(got), comparable(computed)) || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !equality.Semantic.DeepEqual(comparable(got), comparable(computed)) {
			f.violate(checkStatusRestored, "%s %s, after %s: %s; the controller computed %s",
				c.kind, w.what, bound, jsonOf(got), jsonOf(computed))
		}
		if records != nil {
			if err := recordsHeld(ctx, []client.Object{obj}, records); err != nil {
				f.violate(checkFailureRecords, "after %s: %v", w.what, err)
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.violations
}

// statusOf reads obj's status afresh, as JSON values.
func statusOf(t *testing.T, obj client.Object) map[string]any {
	t.Helper()
	u := unstructuredFor(t, obj)
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), u); err != nil {
		t.Fatalf("reading %s: %v", obj.GetName(), err)
	}
	st, _, _ := unstructured.NestedMap(u.Object, "status")
	return st
}

// quietStatus waits until obj's status has not changed for a while: what
// the controller computed.
func quietStatus(t *testing.T, obj client.Object) map[string]any {
	t.Helper()
	last, since := statusOf(t, obj), time.Now()
	deadline := time.Now().Add(testenv.Timeout)
	for time.Since(since) < quiet || last == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the status of %s never settled: %s", obj.GetName(), jsonOf(last))
		}
		time.Sleep(100 * time.Millisecond)
		if now := statusOf(t, obj); !equality.Semantic.DeepEqual(now, last) {
			last, since = now, time.Now()
		}
	}
	return last
}

// writeStatus replaces obj's status as the controller's own writer does
// (a JSON patch of /status without a resourceVersion): how an older
// leader's late write lands.
func writeStatus(t *testing.T, obj client.Object, st map[string]any) {
	t.Helper()
	body, err := json.Marshal([]map[string]any{{"op": "add", "path": "/status", "value": st}})
	if err != nil {
		t.Fatal(err)
	}
	u := unstructuredFor(t, obj)
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	if err := env.Client.Status().Patch(context.Background(), u, client.RawPatch(types.JSONPatchType, body)); err != nil {
		t.Fatalf("writing the status of %s: %v", obj.GetName(), err)
	}
}

func unstructuredFor(t *testing.T, obj client.Object) *unstructured.Unstructured {
	t.Helper()
	gvk, err := apiutil.GVKForObject(obj, env.Client.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// forge is a status another writer made of st: every condition turned
// around, and the failure records dropped.
func forge(st map[string]any) map[string]any {
	out := runtimeCopy(st)
	conds, _, _ := unstructured.NestedSlice(out, "conditions")
	for _, c := range conds {
		m := c.(map[string]any)
		if m["status"] == "True" {
			m["status"] = "False"
		} else {
			m["status"] = "True"
		}
		m["reason"], m["message"] = "Forged", "written by another writer"
	}
	if len(conds) == 0 {
		conds = []any{map[string]any{"type": "Forged", "status": "True", "reason": "Forged", "message": "written by another writer",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}
	}
	_ = unstructured.SetNestedSlice(out, conds, "conditions")
	delete(out, "recentFailures")
	return out
}

// comparable is st without what a recomputation may legitimately change:
// when a condition changed last and when a run began and ended.
func comparable(st map[string]any) map[string]any {
	out := runtimeCopy(st)
	delete(out, "lastRunStartTime")
	delete(out, "lastRunEndTime")
	conds, _, _ := unstructured.NestedSlice(out, "conditions")
	for _, c := range conds {
		delete(c.(map[string]any), "lastTransitionTime")
	}
	if conds != nil {
		_ = unstructured.SetNestedSlice(out, conds, "conditions")
	}
	return out
}

func runtimeCopy(st map[string]any) map[string]any {
	if st == nil {
		return map[string]any{}
	}
	return runtime.DeepCopyJSON(st)
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// The second-writer checks can fail: with no manager left to put the
// computed status back, the forged status and the late write that drops a
// failure record are both reported, and so are the records they dropped.
func TestSecondWriterCheckCatchesAStatusNobodyRestores(t *testing.T) {
	var jw writerCase
	for _, c := range writerCases() {
		if c.kind == "JobWatcher" {
			jw = c
		}
	}
	vs := runSecondWriter(t, jw, false, 2*time.Second)
	var restored, records int
	for _, v := range vs {
		switch v.check {
		case checkStatusRestored:
			restored++
		case checkFailureRecords:
			records++
		}
	}
	if restored != 2 || records != 2 {
		t.Errorf("violations %v; want the forged status and the late write reported, and the record each dropped (2 and 2)", vs)
	}
}
