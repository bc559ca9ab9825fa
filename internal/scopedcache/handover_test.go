package scopedcache_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/scopedcache"
	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/faultinject"
)

// ledger is a handler that checks what it is told forms one history per
// object: an Add only for an object not told alive, every version told
// once and in order, and records what it holds.
type ledger struct {
	mu         sync.Mutex
	alive      map[string]string // key → last resourceVersion told
	last       map[string]uint64
	violations []string
}

func newLedger() *ledger { return &ledger{alive: map[string]string{}, last: map[string]uint64{}} }

func (l *ledger) OnAdd(obj any, _ bool) {
	o := obj.(client.Object)
	l.mu.Lock()
	defer l.mu.Unlock()
	key := o.GetNamespace() + "/" + o.GetName()
	if _, ok := l.alive[key]; ok {
		l.violations = append(l.violations, fmt.Sprintf("%s told added twice (resourceVersion %s)", key, o.GetResourceVersion()))
	}
	l.told(key, o)
}

func (l *ledger) OnUpdate(_, obj any) {
	o := obj.(client.Object)
	l.mu.Lock()
	defer l.mu.Unlock()
	key := o.GetNamespace() + "/" + o.GetName()
	if _, ok := l.alive[key]; !ok {
		l.violations = append(l.violations, fmt.Sprintf("%s told updated, never told added", key))
	}
	l.told(key, o)
}

func (l *ledger) told(key string, o client.Object) {
	rv, _ := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
	if rv <= l.last[key] {
		l.violations = append(l.violations, fmt.Sprintf("%s told resourceVersion %d after %d", key, rv, l.last[key]))
	}
	l.last[key] = rv
	l.alive[key] = o.GetResourceVersion()
}

func (l *ledger) OnDelete(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o := obj.(client.Object)
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.alive, o.GetNamespace()+"/"+o.GetName())
}

func (l *ledger) Violations() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.violations...)
}

func (l *ledger) Alive() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.alive))
	for k := range l.alive {
		out = append(out, k)
	}
	return out
}

func clusterWide(c *scopedcache.Cache) func() bool {
	return func() bool { _, all := c.Namespaces(&corev1.Pod{}); return all }
}

func informers(scope string) func() (float64, error) {
	return func() (float64, error) {
		return testenv.Metric("deckhand_scoped_cache_informers", map[string]string{"kind": "Pod", "scope": scope})
	}
}

// Crossing the threshold either way, while pods are made, tells each pod's
// history once: a switch hands a namespace from one informer to the other,
// and the new informer's initial list is not told again.
func TestASwitchTellsEachObjectOnce(t *testing.T) {
	g := testenv.NewG(t)
	n := scopedcache.ClusterWideAbove + 1
	spaces := make([]string, 0, n)
	needs := make([]*corev1.ConfigMap, 0, n)
	for i := range n {
		ns := env.Namespace(t)
		spaces = append(spaces, ns)
		if i < n-1 {
			needs = append(needs, need(t, ns))
		}
		pod(t, ns, "first", "")
	}
	l := newLedger()
	c, _ := startCacheWith(t, env.Config, l)
	g.Expect(clusterWide(c)()).To(BeFalse())

	// Pods made all along, as a PodSet scaling up makes them.
	ctx, stop := context.WithCancel(context.Background())
	var made sync.WaitGroup
	var count atomic.Int64
	made.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: spaces[i%scopedcache.PerNamespaceAtMost], Name: fmt.Sprintf("p%d", i)},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
			if env.Client.Create(ctx, p) == nil {
				count.Add(1)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})

	// Pods are being made when the switch starts, and still when it ends:
	// on a fast machine the switch takes less time than a fixed count.
	g.Eventually(count.Load).Should(BeNumerically(">=", 5), "pods are being made")
	needs = append(needs, need(t, spaces[n-1]))
	g.Eventually(clusterWide(c)).Should(BeTrue())
	g.Eventually(func() []string { return namespaces(c) }).Should(BeEmpty(),
		"the per-namespace informers stop once the cluster-wide one has taken over")
	for _, cm := range needs[scopedcache.PerNamespaceAtMost:] {
		g.Expect(env.Client.Delete(context.Background(), cm)).To(Succeed())
	}
	g.Eventually(clusterWide(c)).Should(BeFalse())
	g.Eventually(func() []string { return namespaces(c) }).Should(ConsistOf(spaces[:scopedcache.PerNamespaceAtMost]))
	switched := count.Load()
	g.Eventually(count.Load).Should(BeNumerically(">=", switched+5), "pods are made after the switch back")
	stop()
	made.Wait()

	// Everything in the namespaces still needed was told, once.
	var want []string
	for _, ns := range spaces[:scopedcache.PerNamespaceAtMost] {
		names, err := podNames(env.Client, client.InNamespace(ns))()
		g.Expect(err).NotTo(HaveOccurred())
		want = append(want, names...)
	}
	g.Eventually(l.Alive).Should(ContainElements(want))
	g.Expect(l.Violations()).To(BeEmpty())
}

// Above ClusterWideAbove namespaces the kind is held cluster-wide; it goes
// back to one informer per namespace only at PerNamespaceAtMost or fewer,
// and then the cluster-wide informer stops although pods are read all the
// while.
func TestTheClusterWideInformerGoesAlthoughReadsGoOn(t *testing.T) {
	g := testenv.NewG(t)
	n := scopedcache.ClusterWideAbove + 1
	spaces := make([]string, 0, n)
	needs := make([]*corev1.ConfigMap, 0, n)
	for range n {
		ns := env.Namespace(t)
		spaces = append(spaces, ns)
		needs = append(needs, need(t, ns))
	}
	c, _ := startCache(t)
	g.Expect(clusterWide(c)()).To(BeTrue())
	g.Expect(informers("cluster")()).To(Equal(1.0))

	ctx, stop := context.WithCancel(context.Background())
	var reads sync.WaitGroup
	defer func() { stop(); reads.Wait() }()
	reads.Go(func() {
		for ctx.Err() == nil {
			var pods corev1.PodList
			_ = c.List(ctx, &pods)
			_ = c.List(ctx, &pods, client.InNamespace(spaces[0]))
			_ = c.Get(ctx, client.ObjectKey{Namespace: spaces[1], Name: "none"}, &corev1.Pod{})
			time.Sleep(20 * time.Millisecond)
		}
	})

	// Between the two thresholds: no switch.
	for _, cm := range needs[scopedcache.ClusterWideAbove-2:] {
		g.Expect(env.Client.Delete(context.Background(), cm)).To(Succeed())
	}
	g.Consistently(clusterWide(c)).WithTimeout(2*time.Second).Should(BeTrue(),
		"a kind needed in %d namespaces switched back", scopedcache.ClusterWideAbove-2)

	for _, cm := range needs[scopedcache.PerNamespaceAtMost : scopedcache.ClusterWideAbove-2] {
		g.Expect(env.Client.Delete(context.Background(), cm)).To(Succeed())
	}
	g.Eventually(informers("cluster")).Should(Equal(0.0), "the cluster-wide informer outlived the need for it")
	g.Expect(clusterWide(c)()).To(BeFalse())
	g.Expect(informers("namespace")()).To(BeNumerically(">=", scopedcache.PerNamespaceAtMost))
	g.Expect(podNames(c, client.InNamespace(spaces[0]))()).To(BeEmpty())
}

// A read that starts an informer waits for it to sync; when the informer
// stops first (the apiserver unreachable for longer than the cache keeps
// an unsynced informer), the reader gets an error, and once the apiserver
// is back reads are answered again.
func TestAReaderIsWokenWhenItsInformerStops(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	pod(t, ns, "a", "")
	outage := faultinject.NewOutage("/pods")
	c, _ := startCacheWith(t, outage.Config(env.Config))
	outage.Begin()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	began := time.Now()
	var pods corev1.PodList
	err := c.List(ctx, &pods, client.InNamespace(ns))
	g.Expect(err).To(HaveOccurred())
	g.Expect(errors.Is(err, context.DeadlineExceeded)).To(BeFalse(), "the reader waited for its own deadline: %v", err)
	g.Expect(time.Since(began)).To(BeNumerically("<", 10*time.Second))

	outage.End()
	g.Eventually(podNames(c, client.InNamespace(ns))).Should(Equal([]string{ns + "/a"}))
}

// A cache that goes cluster-wide and is taken back below
// PerNamespaceAtMost before the cluster-wide informer has synced (or right
// after) ends with one informer per namespace, the cluster-wide one gone,
// and tells no pod twice: the cluster-wide informer told the pods of every
// namespace it owned from its start, before it synced.
func TestASwitchUndoneAtOnceEndsPerNamespace(t *testing.T) {
	g := testenv.NewG(t)
	n := scopedcache.ClusterWideAbove + 1
	needs := make([]*corev1.ConfigMap, 0, n)
	spaces := make([]string, 0, n)
	for i := range n {
		ns := env.Namespace(t)
		spaces = append(spaces, ns)
		if i < n-1 {
			needs = append(needs, need(t, ns))
		}
		pod(t, ns, "first", "")
	}
	l := newLedger()
	c, _ := startCacheWith(t, env.Config, l)
	g.Expect(clusterWide(c)()).To(BeFalse())
	needs = append(needs, need(t, spaces[n-1]))
	g.Eventually(informers("cluster")).Should(Equal(1.0))
	for _, cm := range needs[scopedcache.PerNamespaceAtMost:] {
		g.Expect(env.Client.Delete(context.Background(), cm)).To(Succeed())
	}
	g.Eventually(func() []string { return namespaces(c) }).Should(ConsistOf(spaces[:scopedcache.PerNamespaceAtMost]))
	g.Eventually(clusterWide(c)).Should(BeFalse())
	g.Eventually(informers("cluster")).Should(Equal(0.0))
	g.Expect(l.Violations()).To(BeEmpty())
}

// A read of a namespace before it is needed starts its informer, which
// tells its pods at once; when that namespace's need then takes the cache
// cluster-wide before the informer has synced, the handover to the
// cluster-wide informer does not tell those pods again.
func TestAReadJustBeforeTheSwitchIsNotToldTwice(t *testing.T) {
	g := testenv.NewG(t)
	for range scopedcache.ClusterWideAbove {
		need(t, env.Namespace(t))
	}
	read := env.Namespace(t)
	for i := range 5 {
		pod(t, read, fmt.Sprintf("p%d", i), "")
	}
	l := newLedger()
	c, _ := startCacheWith(t, env.Config, l)
	g.Expect(clusterWide(c)()).To(BeFalse())

	go func() { _, _ = podNames(c, client.InNamespace(read))() }()
	g.Eventually(l.Alive).WithPolling(time.Millisecond).Should(ContainElement(read + "/p0"))
	need(t, read)
	g.Eventually(clusterWide(c)).Should(BeTrue())
	g.Eventually(func() []string { return namespaces(c) }).Should(BeEmpty(), "the handover to the cluster-wide informer")
	g.Expect(l.Violations()).To(BeEmpty())
}

// What each handler was told of a namespace is recorded from its informer's
// start (a switch before it synced must know what was told), and the record
// goes once every handler has been told what the informer listed, not a
// keepFor later: at N = 10,000 Jobs it held some 100 bytes a Job for the
// manager's first minute (issue 26).
func TestTheFirstRecordGoesOnceHandlersWereTold(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	for i := range 20 {
		pod(t, ns, fmt.Sprintf("p%d", i), "node-a")
	}
	need(t, ns)
	c, err := scopedcache.Options{KeepFor: time.Minute}.New(podsWhereNeeded)(env.Config, cache.Options{Scheme: manager.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	inf, err := c.GetInformer(ctx, &corev1.Pod{})
	g.Expect(err).NotTo(HaveOccurred())
	s := &seen{}
	_, err = inf.AddEventHandler(s)
	g.Expect(err).NotTo(HaveOccurred())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("cache stopped with an error: %v", err)
		}
	})
	g.Expect(c.WaitForCacheSync(ctx)).To(BeTrue())
	sc := c.(*scopedcache.Cache)
	g.Eventually(s.Keys).Should(HaveLen(20))
	g.Eventually(func() int { return scopedcache.Recorded(sc, &corev1.Pod{}) }).WithTimeout(10*time.Second).Should(BeZero(),
		"the record of what the handler was told outlives its initial list")
	// Still told, once, of what comes after.
	pod(t, ns, "later", "node-a")
	g.Eventually(s.Keys).Should(ContainElement(ns + "/later"))
}
