//go:build faults

package faults_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	podsetcontroller "github.com/deckhand-dev/deckhand/internal/controller/podset"
	"github.com/deckhand-dev/deckhand/internal/scopedcache"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// The fault class "duplicated and replayed events". Crossing the scoped
// cache's threshold (more than scopedcache.ClusterWideAbove namespaces that
// need pods, then back to scopedcache.PerNamespaceAtMost) moves every
// namespace from its own pod informer to the cluster-wide one and back: for
// a while two informers hold a namespace, and the new one's initial list
// replays every pod as an Add. A handler told an Add twice, or a version
// after a later one, counts a pod twice or acts on an old one: before PodSet
// waited for its pods by name, replayed Adds met its creation count early
// and the next sync made extra pods.
const checkToldOnce = "the cache tells each pod's history once, in order"

// checkClusterInformerGoes: once no more than PerNamespaceAtMost
// namespaces need pods, the cluster-wide pod informer stops.
const checkClusterInformerGoes = "the cluster-wide pod informer goes once few namespaces need pods"

// switchScales are the PodSet's two sizes: it is created with the first as
// its namespace becomes the one too many for per-namespace informers, and
// grows to the second as the cache switches back.
var switchScales = [2]int32{30, 60}

func faultClassScenarios() []scenario {
	return []scenario{informerSwitchScenario(), outageScenario()}
}

func informerSwitchScenario() scenario {
	return scenario{name: fmt.Sprintf("PodSet scale up 0→%d→%d across the cache's informer switches", switchScales[0], switchScales[1]),
		controllers: []string{podsetcontroller.ControllerName},
		// Its writes are pod creations, alike: the first few crash points
		// crash mid-switch, the later ones add minutes and nothing else.
		crashPoints: 4, costly: true,
		start: informerSwitchPlan}
}

// informerSwitchPlan: ClusterWideAbove other namespaces hold a PodSet of 0
// (they need pods); the scenario's PodSet is created in one more, so the
// cache goes cluster-wide while it scales up; once it has, the PodSets of
// enough other namespaces are deleted to take the cache back to one
// informer per namespace, and the PodSet grows again meanwhile.
func informerSwitchPlan(t *testing.T, f *fixture) plan {
	ctx := context.Background()
	ns := env.Namespace(t)
	key := types.NamespacedName{Namespace: ns, Name: podSetName}
	foreign, orphan := podSetNeighbours(t, ns)
	newSet := func(namespace string, size int32) *appsv1beta1.PodSet {
		return &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: podSetName},
			Spec: appsv1beta1.PodSetSpec{Replicas: size, Template: template()}}
	}

	clearLeftoverPodSets(t)
	others := make([]types.NamespacedName, scopedcache.ClusterWideAbove)
	for i := range others {
		others[i] = types.NamespacedName{Namespace: env.Namespace(t), Name: podSetName}
		env.Create(t, newSet(others[i].Namespace, 0))
	}
	stop := f.startPlain()
	waitFor(t, "the other PodSets to settle", func() error {
		for _, o := range others {
			if err := podSetSettled(ctx, o, 0, "busybox:1"); err != nil {
				return fmt.Errorf("%s: %w", o, err)
			}
		}
		return nil
	})
	stop()

	var bound atomic.Int32
	bound.Store(switchScales[0])
	observe(t, podList(ns), podSetChecks(f, foreign, orphan, bound.Load))
	return plan{
		started: func(mgr ctrl.Manager) { tellOnce(t, f, mgr) },
		trigger: []func() error{
			func() error {
				// Once the manager runs one pod informer per namespace.
				time.Sleep(managerStarts)
				return nil
			},
			func() error { return ignoreExists(env.Client.Create(ctx, newSet(ns, switchScales[0]))) },
			func() error { return cacheIs("cluster", 1) },
			func() error {
				for _, o := range others[scopedcache.PerNamespaceAtMost-1:] {
					err := env.Client.Delete(ctx, &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name}})
					if client.IgnoreNotFound(err) != nil {
						return err
					}
				}
				return nil
			},
			func() error {
				bound.Store(switchScales[1])
				set := &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podSetName}}
				return env.Update(set, func() { set.Spec.Replicas = switchScales[1] })
			},
		},
		converged: func() error { return podSetSettled(ctx, key, switchScales[1], "busybox:1") },
		final: func() {
			deadline := time.Now().Add(informerGoesWithin)
			for err := cacheIs("cluster", 0); err != nil; err = cacheIs("cluster", 0) {
				if time.Now().After(deadline) {
					f.violate(checkClusterInformerGoes, "%s after the PodSet converged: %v", informerGoesWithin, err)
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		},
	}
}

// clearLeftoverPodSets deletes the PodSets of the namespaces being deleted,
// as a cluster's namespace controller would (envtest runs none), and waits
// until no namespace being deleted holds one. The plan counts the namespaces
// that need pods: the 12 PodSets an earlier run (or scenario) leaves behind
// in its deleted namespaces still need pods, and with them the needs never
// fall to PerNamespaceAtMost, so the cache rightly stays cluster-wide (what
// the informer-switch runs after the first of a process reported as the
// cluster-wide informer staying).
func clearLeftoverPodSets(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	waitFor(t, "the PodSets of deleted namespaces to go", func() error {
		var sets appsv1beta1.PodSetList
		if err := env.Client.List(ctx, &sets); err != nil {
			return err
		}
		left := 0
		for i := range sets.Items {
			set := &sets.Items[i]
			var ns corev1.Namespace
			if err := env.Client.Get(ctx, types.NamespacedName{Name: set.Namespace}, &ns); client.IgnoreNotFound(err) != nil {
				return err
			}
			if ns.DeletionTimestamp == nil && ns.Name != "" {
				continue
			}
			left++
			if err := env.Client.Delete(ctx, set); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
		if left > 0 {
			return fmt.Errorf("%d PodSets left in deleted namespaces", left)
		}
		return nil
	})
}

// informerGoesWithin bounds how long after the PodSet converged the
// cluster-wide informer may remain.
const informerGoesWithin = 10 * time.Second

// cacheIs is nil once the manager's pod informers of scope number n.
func cacheIs(scope string, n float64) error {
	got, err := testenv.Metric("deckhand_scoped_cache_informers", map[string]string{"kind": "Pod", "scope": scope})
	if err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("%v pod informers of scope %s, want %v", got, scope, n)
	}
	return nil
}

// tellOnce adds a ledger to the manager's pod informer: what the manager's
// controllers are told, through the same cache.
func tellOnce(t *testing.T, f *fixture, mgr ctrl.Manager) {
	inf, err := mgr.GetCache().GetInformer(context.Background(), &corev1.Pod{})
	if err != nil {
		t.Fatalf("the manager's pod informer: %v", err)
	}
	if _, err := inf.AddEventHandler(&ledger{f: f, alive: map[string]bool{}, last: map[string]uint64{}}); err != nil {
		t.Fatalf("adding the ledger: %v", err)
	}
}

// ledger is a handler that checks what it is told forms one history per
// pod: an Add only for a pod not told alive, an Update only for one told
// alive, versions never told after a later one. An Update may repeat the
// version told last: a relist tells every pod it still holds again, as an
// Update, and every client-go informer does so. One ledger per manager: a
// new cache tells everything anew.
type ledger struct {
	f     *fixture
	mu    sync.Mutex
	alive map[string]bool
	last  map[string]uint64 // pod key → last resourceVersion told
}

func (l *ledger) OnAdd(obj any, _ bool) {
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	key, rv := client.ObjectKeyFromObject(o).String(), version(o)
	switch {
	case l.alive[key]:
		l.f.violate(checkToldOnce, "pod %s told added twice (resourceVersion %d after %d)", key, rv, l.last[key])
	case rv <= l.last[key]:
		l.f.violate(checkToldOnce, "pod %s told added at resourceVersion %d, after %d", key, rv, l.last[key])
	}
	l.alive[key], l.last[key] = true, max(rv, l.last[key])
}

func (l *ledger) OnUpdate(_, obj any) {
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	key, rv := client.ObjectKeyFromObject(o).String(), version(o)
	switch {
	case !l.alive[key]:
		l.f.violate(checkToldOnce, "pod %s told updated (resourceVersion %d), not told added since it was told deleted or ever", key, rv)
	case rv < l.last[key]:
		l.f.violate(checkToldOnce, "pod %s told resourceVersion %d after %d", key, rv, l.last[key])
	}
	l.alive[key], l.last[key] = true, max(rv, l.last[key])
}

func (l *ledger) OnDelete(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.alive, client.ObjectKeyFromObject(o).String())
}

func version(o client.Object) uint64 {
	rv, _ := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
	return rv
}

// The ledger reports a pod told added twice, a version told after a later
// one and an update of a pod told deleted, and lets a relist's repeat
// through.
func TestLedgerCatchesAnEventToldTwice(t *testing.T) {
	f := &fixture{t: t}
	l := &ledger{f: f, alive: map[string]bool{}, last: map[string]uint64{}}
	pod := func(name, rv string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
	}
	l.OnAdd(pod("a", "10"), true)
	l.OnUpdate(pod("a", "10"), pod("a", "12"))
	l.OnUpdate(pod("a", "12"), pod("a", "12")) // a relist
	l.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/a", Obj: pod("a", "12")})
	l.OnAdd(pod("a", "20"), false) // made again under its name
	if len(f.violations) != 0 {
		t.Fatalf("one history per pod was reported: %v", f.violations)
	}
	l.OnAdd(pod("b", "30"), true)
	l.OnAdd(pod("b", "30"), false) // a new informer's initial list, replayed
	l.OnUpdate(pod("a", "20"), pod("a", "15"))
	l.OnDelete(pod("c", "40"))
	l.OnUpdate(pod("c", "40"), pod("c", "41"))
	if len(f.violations) != 3 {
		t.Fatalf("violations %v, want 3 of %q", f.violations, checkToldOnce)
	}
	for _, v := range f.violations {
		if v.check != checkToldOnce {
			t.Errorf("violation %v, want %q", v, checkToldOnce)
		}
	}
}

// The bound check sees the extra pods replayed Adds once made: a PodSet
// whose creations were counted twice overshoots its size.
func TestBoundCheckCatchesExtraPods(t *testing.T) {
	f := &fixture{t: t}
	check := podSetChecks(f, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "foreign"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan"}}, func() int32 { return 2 })
	owned := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: appsv1beta1.GroupVersion.String(), Kind: "PodSet", Name: podSetName, UID: "set", Controller: new(true)}}}}
	}
	for _, name := range []string{"web-a", "web-b", "web-a"} {
		check(watch.Event{Type: watch.Added, Object: owned(name)})
	}
	if len(f.violations) != 0 {
		t.Fatalf("2 pods of a PodSet of 2 were reported: %v", f.violations)
	}
	check(watch.Event{Type: watch.Added, Object: owned("web-c")})
	if len(f.violations) != 1 || f.violations[0].check != checkPodSetBound {
		t.Errorf("violations %v, want one of %q", f.violations, checkPodSetBound)
	}
}
