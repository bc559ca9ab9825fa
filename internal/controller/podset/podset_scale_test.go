package podset

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// podOpt shapes a test pod.
type podOpt func(*corev1.Pod)

func testPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0),
			Labels: map[string]string{appsv1beta1.PodTemplateHashLabel: "new"}},
		Spec:   corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func unscheduled(p *corev1.Pod) { p.Spec.NodeName = "" }
func pending(p *corev1.Pod)     { p.Status.Phase = corev1.PodPending }
func unknown(p *corev1.Pod)     { p.Status.Phase = corev1.PodUnknown }
func outdated(p *corev1.Pod)    { p.Labels[appsv1beta1.PodTemplateHashLabel] = "old" }
func deleteFirst(p *corev1.Pod) { annotate(appsv1beta1.DeleteFirstAnnotation, "true")(p) }
func terminating(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: t0} }
func succeeded(p *corev1.Pod)   { p.Status.Phase = corev1.PodSucceeded }
func failed(p *corev1.Pod)      { p.Status.Phase = corev1.PodFailed }

func readySince(d time.Duration) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(d))})
	}
}

func ready(p *corev1.Pod) { readySince(0)(p) }

func annotate(k, v string) podOpt {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}

func createdAt(d time.Duration) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t0.Add(d)) }
}

func restarted(n int32) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: n}}
	}
}

func names(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

func onNode(n string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = n } }

func TestDeletionOrder(t *testing.T) {
	tests := map[string]struct {
		pods []*corev1.Pod
		want []string // first to delete first
	}{
		"marked delete-first beats every other rule": {
			pods: []*corev1.Pod{testPod("unscheduled", unscheduled, pending), testPod("marked", ready, deleteFirst)},
			want: []string{"marked", "unscheduled"},
		},
		"a delete-first value other than true is ignored": {
			pods: []*corev1.Pod{testPod("marked", ready, annotate(appsv1beta1.DeleteFirstAnnotation, "yes")), testPod("notready")},
			want: []string{"notready", "marked"},
		},
		"unscheduled before scheduled": {
			pods: []*corev1.Pod{testPod("scheduled", pending), testPod("unscheduled", unscheduled, pending)},
			want: []string{"unscheduled", "scheduled"},
		},
		"pending before unknown before running": {
			pods: []*corev1.Pod{testPod("running"), testPod("unknown", unknown), testPod("pending", pending)},
			want: []string{"pending", "unknown", "running"},
		},
		"not ready before ready": {
			pods: []*corev1.Pod{testPod("ready", ready), testPod("notready")},
			want: []string{"notready", "ready"},
		},
		"lower deletion cost first, missing is 0, invalid is 0": {
			pods: []*corev1.Pod{
				testPod("cost10", ready, annotate(podDeletionCost, "10")),
				testPod("none", ready),
				testPod("costneg", ready, annotate(podDeletionCost, "-5")),
				testPod("invalid", ready, annotate(podDeletionCost, "cheap"), createdAt(-time.Hour)),
			},
			want: []string{"costneg", "none", "invalid", "cost10"},
		},
		"deletion cost outranks the template": {
			pods: []*corev1.Pod{testPod("old-expensive", ready, outdated, annotate(podDeletionCost, "100")), testPod("new", ready)},
			want: []string{"new", "old-expensive"},
		},
		"pods on crowded nodes first": {
			pods: []*corev1.Pod{testPod("alone", ready, onNode("n2")), testPod("crowded-a", ready, createdAt(-time.Hour)), testPod("crowded-b", ready, createdAt(-time.Hour))},
			want: []string{"crowded-a", "crowded-b", "alone"},
		},
		"deletion cost outranks crowding": {
			pods: []*corev1.Pod{testPod("alone", ready, onNode("n2")), testPod("crowded-a", ready, annotate(podDeletionCost, "5")), testPod("crowded-b", ready, annotate(podDeletionCost, "5"))},
			want: []string{"alone", "crowded-a", "crowded-b"},
		},
		"outdated before updated": {
			pods: []*corev1.Pod{testPod("new", ready), testPod("old", ready, outdated)},
			want: []string{"old", "new"},
		},
		"ready for less time first": {
			pods: []*corev1.Pod{testPod("long", readySince(0)), testPod("short", readySince(time.Hour))},
			want: []string{"short", "long"},
		},
		"more restarts first": {
			pods: []*corev1.Pod{testPod("calm", ready), testPod("flappy", ready, restarted(3))},
			want: []string{"flappy", "calm"},
		},
		"newest first": {
			pods: []*corev1.Pod{testPod("old"), testPod("new", createdAt(time.Minute)), testPod("mid", createdAt(time.Second))},
			want: []string{"new", "mid", "old"},
		},
		"ties broken by name": {
			pods: []*corev1.Pod{testPod("b"), testPod("a"), testPod("c")},
			want: []string{"a", "b", "c"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := names(deletionOrder(tc.pods, "new"))
			if !slices.Equal(got, tc.want) {
				t.Errorf("deletion order = %v, want %v", got, tc.want)
			}
			// The order must not depend on the input order.
			reversed := slices.Clone(tc.pods)
			slices.Reverse(reversed)
			if got := names(deletionOrder(reversed, "new")); !slices.Equal(got, tc.want) {
				t.Errorf("deletion order of reversed input = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSlowStartStopsAfterTheFirstFailure(t *testing.T) {
	tests := map[string]struct {
		n, failFrom   int // calls numbered from 1 in the order they start; fail from this call on (0: never)
		maxCalls      int // calls in flight when the first failure returns may still finish
		wantSucceeded int
	}{
		"all succeed":             {n: 10, maxCalls: 10, wantSucceeded: 10},
		"first call fails":        {n: 100, failFrom: 1, maxCalls: 1},
		"quota after three":       {n: 100, failFrom: 4, maxCalls: 3 + 4, wantSucceeded: 3},
		"fails in the last call":  {n: 10, failFrom: 10, maxCalls: 10, wantSucceeded: 9},
		"every later call fails":  {n: 3, failFrom: 2, maxCalls: 3, wantSucceeded: 1},
		"quota after a long ramp": {n: 1000, failFrom: 201, maxCalls: 200 + 8, wantSucceeded: 200},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int32
			succeeded, errs := slowStart(tc.n, 1, 8, admitAll, func() error {
				if n := int(calls.Add(1)); tc.failFrom > 0 && n >= tc.failFrom {
					return errors.New("exceeded quota")
				}
				return nil
			})
			if got := int(calls.Load()); got > tc.maxCalls || succeeded != tc.wantSucceeded {
				t.Errorf("calls = %d, succeeded = %d; want at most %d, %d", got, succeeded, tc.maxCalls, tc.wantSucceeded)
			}
			if wantErrs := int(calls.Load()) - tc.wantSucceeded; len(errs) != wantErrs {
				t.Errorf("errors = %d, want %d", len(errs), wantErrs)
			}
		})
	}
}

// The concurrency starts at the initial value, grows by one per success and
// never passes the limit.
func TestSlowStartRampsUpToTheLimit(t *testing.T) {
	var (
		mu                 sync.Mutex
		inflight, peak, ok int
		overGrowth         bool
	)
	succeeded, errs := slowStart(500, 2, 16, admitAll, func() error {
		mu.Lock()
		inflight++
		peak = max(peak, inflight)
		overGrowth = overGrowth || inflight > 2+ok
		mu.Unlock()
		time.Sleep(100 * time.Microsecond)
		mu.Lock()
		inflight--
		ok++
		mu.Unlock()
		return nil
	})
	if succeeded != 500 || len(errs) != 0 {
		t.Fatalf("succeeded = %d, errors = %d; want 500, 0", succeeded, len(errs))
	}
	if peak != 16 {
		t.Errorf("most calls in flight = %d, want the limit, 16", peak)
	}
	if overGrowth {
		t.Errorf("more calls in flight than the initial 2 plus the successes so far")
	}
}

// admitAll lets every call of slowStart start at once.
func admitAll() (func(), error) { return func() {}, nil }

func TestInitialInflight(t *testing.T) {
	tests := map[string]struct {
		active  int
		failing bool
		want    int
	}{
		"new PodSet starts at one":           {active: 0, want: 1},
		"a few pods":                         {active: 3, want: 3},
		"capped":                             {active: 500, want: maxInflight},
		"failing starts at one however many": {active: 500, failing: true, want: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := initialInflight(tc.active, tc.failing); got != tc.want {
				t.Errorf("initialInflight(%d, %v) = %d, want %d", tc.active, tc.failing, got, tc.want)
			}
		})
	}
}

func TestMaxUnavailable(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(n int32) *intstr.IntOrString { v := intstr.FromInt32(n); return &v }
	tests := map[string]struct {
		v, surge        *intstr.IntOrString
		size            int32
		want, wantSurge int
	}{
		"default is one":                       {size: 10, want: 1},
		"number":                               {v: num(3), size: 10, want: 3},
		"number capped at size":                {v: num(30), size: 10, want: 10},
		"percent rounds down":                  {v: pct("25%"), size: 10, want: 2},
		"small percent is one pod":             {v: pct("10%"), size: 3, want: 1},
		"hundred percent":                      {v: pct("100%"), size: 4, want: 4},
		"size zero":                            {v: pct("50%"), size: 0, want: 1},
		"garbage falls back to one":            {v: pct("lots"), size: 10, want: 1},
		"zero without surge is one":            {v: num(0), size: 10, want: 1},
		"zero with surge is zero":              {v: num(0), surge: num(1), size: 10, want: 0, wantSurge: 1},
		"percent with surge may round to zero": {v: pct("10%"), surge: pct("10%"), size: 3, want: 0, wantSurge: 1},
		"surge percent rounds up":              {surge: pct("25%"), size: 10, want: 1, wantSurge: 3},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := appsv1beta1.PodSetUpdateStrategy{Type: appsv1beta1.RollingUpdateStrategy, RollingUpdate: appsv1beta1.PodSetRollingUpdate{MaxUnavailable: tc.v, MaxSurge: tc.surge}}
			if got := maxUnavailable(s, tc.size); got != tc.want {
				t.Errorf("maxUnavailable = %d, want %d", got, tc.want)
			}
			if got := maxSurge(s, tc.size); got != tc.wantSurge {
				t.Errorf("maxSurge = %d, want %d", got, tc.wantSurge)
			}
		})
	}
}

func TestPlan(t *testing.T) {
	num := func(n int32) *intstr.IntOrString { v := intstr.FromInt32(n); return &v }
	surge1 := appsv1beta1.PodSetUpdateStrategy{Type: appsv1beta1.RollingUpdateStrategy, RollingUpdate: appsv1beta1.PodSetRollingUpdate{MaxSurge: num(1), MaxUnavailable: num(0)}}
	onDelete := appsv1beta1.PodSetUpdateStrategy{Type: appsv1beta1.OnDeleteStrategy}
	tests := map[string]struct {
		spec       appsv1beta1.PodSetSpec
		pods       []*corev1.Pod
		held       int
		wantCreate int
		wantDoomed []string
	}{
		"scale up":                     {spec: appsv1beta1.PodSetSpec{Replicas: 3}, pods: []*corev1.Pod{testPod("a", ready)}, wantCreate: 2},
		"finished pods hold places":    {spec: appsv1beta1.PodSetSpec{Replicas: 3}, pods: []*corev1.Pod{testPod("a", ready)}, held: 1, wantCreate: 1},
		"scale up capped at the burst": {spec: appsv1beta1.PodSetSpec{Replicas: 5000}, wantCreate: createBurst},
		"scale down": {spec: appsv1beta1.PodSetSpec{Replicas: 1}, pods: []*corev1.Pod{testPod("a", ready), testPod("b")},
			wantDoomed: []string{"b"}},
		"surge creates before it deletes": {spec: appsv1beta1.PodSetSpec{Replicas: 2, UpdateStrategy: surge1},
			pods: []*corev1.Pod{testPod("a", ready, outdated), testPod("b", ready, outdated)}, wantCreate: 1},
		"an unready surge pod is not a scale-down": {spec: appsv1beta1.PodSetSpec{Replicas: 2, UpdateStrategy: surge1},
			pods: []*corev1.Pod{testPod("a", ready, outdated), testPod("b", ready, outdated), testPod("new")}},
		"a ready surge pod lets an old one go": {spec: appsv1beta1.PodSetSpec{Replicas: 2, UpdateStrategy: surge1},
			pods:       []*corev1.Pod{testPod("a", ready, outdated), testPod("b", ready, outdated, createdAt(time.Second)), testPod("new", ready)},
			wantDoomed: []string{"b"}},
		"rollout done, surge pod extra": {spec: appsv1beta1.PodSetSpec{Replicas: 1, UpdateStrategy: surge1},
			pods: []*corev1.Pod{testPod("a", ready), testPod("b", ready, createdAt(time.Second))}, wantDoomed: []string{"b"}},
		"OnDelete leaves outdated pods": {spec: appsv1beta1.PodSetSpec{Replicas: 1, UpdateStrategy: onDelete},
			pods: []*corev1.Pod{testPod("a", ready, outdated)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			create, doomed := plan(tc.spec, tc.pods, tc.held, "new", isReady)
			if create != tc.wantCreate || !slices.Equal(names(doomed), tc.wantDoomed) && (len(doomed) != 0 || len(tc.wantDoomed) != 0) {
				t.Errorf("plan = %d, %v; want %d, %v", create, names(doomed), tc.wantCreate, tc.wantDoomed)
			}
		})
	}
}

func TestRolloutVictims(t *testing.T) {
	tests := map[string]struct {
		pods    []*corev1.Pod
		maxUnav int
		want    []string
	}{
		"all updated: nothing to do": {
			pods: []*corev1.Pod{testPod("a", ready), testPod("b", ready)}, maxUnav: 1,
		},
		"all ready: one at a time": {
			pods:    []*corev1.Pod{testPod("a", ready, outdated), testPod("b", ready, outdated, createdAt(time.Second)), testPod("c", ready, outdated)},
			maxUnav: 1, want: []string{"b"},
		},
		"budget of two": {
			pods:    []*corev1.Pod{testPod("a", ready, outdated), testPod("b", ready, outdated), testPod("c", ready, outdated)},
			maxUnav: 2, want: []string{"a", "b"},
		},
		"an unready new pod uses the budget": {
			pods:    []*corev1.Pod{testPod("new"), testPod("a", ready, outdated), testPod("b", ready, outdated)},
			maxUnav: 1,
		},
		"unready outdated pods go regardless of budget": {
			pods:    []*corev1.Pod{testPod("new"), testPod("x", outdated), testPod("y", outdated, pending), testPod("a", ready, outdated)},
			maxUnav: 1, want: []string{"y", "x"},
		},
		"over budget already: only the unready go": {
			pods:    []*corev1.Pod{testPod("p"), testPod("q"), testPod("x", outdated), testPod("a", ready, outdated)},
			maxUnav: 1, want: []string{"x"},
		},
		"marked pods are replaced first": {
			pods:    []*corev1.Pod{testPod("a", ready, outdated), testPod("b", ready, outdated, deleteFirst)},
			maxUnav: 1, want: []string{"b"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, victims := rollout(tc.pods, "new", len(tc.pods), 0, tc.maxUnav, isReady)
			got := names(victims)
			if !slices.Equal(got, tc.want) && (len(got) != 0 || len(tc.want) != 0) {
				t.Errorf("rollout victims = %v, want %v", got, tc.want)
			}
		})
	}
}
