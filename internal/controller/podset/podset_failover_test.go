package podset_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	podsetcontroller "github.com/deckhand-dev/deckhand/internal/controller/podset"
	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/faultinject"
)

// TestFailoverStatusTrail reproduces, without kwok or the bench, what the
// scale-podset row measures after a failover: many PodSets of 10 pods, one
// pod of each deleted while no manager runs, then a fresh manager (what a
// new leader is) over them, the test playing kubelet. It logs, per set, how
// long after its last pod turned ready its status said so, with the
// controller's queue and status-write figures. A measurement, not a gate: it
// runs only with PODSET_TRAIL_SETS set (300 shows the trail), e.g.
//
//	PODSET_TRAIL_SETS=300 go test ./internal/controller/podset/ -run TestFailoverStatusTrail -v -count=1
func TestFailoverStatusTrail(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("PODSET_TRAIL_SETS"))
	if n <= 0 {
		t.Skip("a measurement: set PODSET_TRAIL_SETS (e.g. 300) to run it")
	}
	const size = 10
	g := testenv.NewG(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := env.Namespace(t)
	watcher, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	kubelet := newTestKubelet(ns)
	go kubelet.run(ctx, watcher)

	opts := env.ManagerOptions()
	opts.Controllers = []string{podsetcontroller.ControllerName}
	_, stopFirst := env.StartManager(t, opts)
	sets := make([]*appsv1beta1.PodSet, n)
	for i := range sets {
		sets[i] = newPodSet(ns, fmt.Sprintf("trail-%04d", i), size)
		sets[i].Spec.Template = seedTemplate("busybox")
		env.Create(t, sets[i])
	}
	start := time.Now()
	g.Eventually(func() int { return len(currentSets(g, ns, size)) }, 10*time.Minute, time.Second).Should(Equal(n))
	t.Logf("setup: %d sets of %d current in %s", n, size, time.Since(start).Round(time.Millisecond))

	// The leader dies; one pod of every set goes while none leads.
	stopFirst()
	pods := &corev1.PodList{}
	g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
	deleted := map[string]string{} // PodSet: its pod deleted
	for _, p := range pods.Items {
		set := metav1.GetControllerOf(&p).Name
		if _, ok := deleted[set]; !ok {
			deleted[set] = p.Name
			g.Expect(env.Client.Delete(ctx, &p)).To(Succeed())
		}
	}
	kubelet.reset()

	// The new leader: a fresh manager, cache and reconciler, its status
	// writes counted.
	var patches, conflicts atomic.Int64
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return faultinject.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/status") && strings.Contains(req.URL.Path, "/podsets/") {
				patches.Add(1)
				if err == nil && resp.StatusCode == http.StatusConflict {
					conflicts.Add(1)
				}
			}
			return resp, err
		})
	})
	waitBefore := histogramOf("workqueue_queue_duration_seconds", "name")
	syncBefore := histogramOf("controller_runtime_reconcile_time_seconds", "controller")
	takeover := time.Now()
	env.StartManagerWithConfig(t, cfg, opts)

	// The statuses, seen through a watch: polling a list of every set
	// would load the apiserver this measures.
	current := map[string]time.Time{}
	var maxDepth float64
	w, err := watcher.Watch(ctx, &appsv1beta1.PodSetList{}, client.InNamespace(ns))
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	deadline := time.After(10 * time.Minute)
	for len(current) < n {
		select {
		case ev, ok := <-w.ResultChan():
			g.Expect(ok).To(BeTrue(), "the watch of PodSets ended")
			if s, ok := ev.Object.(*appsv1beta1.PodSet); ok && isCurrent(s, size, deleted) {
				if _, seen := current[s.Name]; !seen {
					current[s.Name] = time.Now()
				}
			}
		case <-tick.C:
			maxDepth = max(maxDepth, gaugeValue("workqueue_depth", podsetcontroller.ControllerName))
		case <-deadline:
			t.Fatalf("%d of %d sets current after 10 minutes", len(current), n)
		}
	}

	ready := kubelet.lastReady()
	trails := make([]time.Duration, 0, len(current))
	var lastPod, lastStatus time.Time
	for name, at := range current {
		r := ready[name]
		trails = append(trails, at.Sub(r))
		lastPod = later(lastPod, r)
		lastStatus = later(lastStatus, at)
	}
	slices.Sort(trails)
	pct := func(p float64) time.Duration {
		return trails[min(len(trails)-1, int(p*float64(len(trails))))].Round(time.Millisecond)
	}
	t.Logf("after the takeover: every set's pods ready at %s, every status current at %s (%s later)",
		lastPod.Sub(takeover).Round(time.Millisecond), lastStatus.Sub(takeover).Round(time.Millisecond), lastStatus.Sub(lastPod).Round(time.Millisecond))
	t.Logf("a set's status after its last pod turned ready: p50 %s, p90 %s, p99 %s, max %s",
		pct(0.5), pct(0.9), pct(0.99), trails[len(trails)-1].Round(time.Millisecond))
	t.Logf("status patches %d (%.2f a set), 409s %d; queue depth max %.0f; queue wait %s; reconcile time %s",
		patches.Load(), float64(patches.Load())/float64(n), conflicts.Load(), maxDepth,
		histogramOf("workqueue_queue_duration_seconds", "name").since(waitBefore),
		histogramOf("controller_runtime_reconcile_time_seconds", "controller").since(syncBefore))
}

// A new leader queues every PodSet at once, and each sync waits on the
// apiserver: the syncs overlap, sixteen at a time, so that 1,000 sets'
// statuses after a failover do not wait on four (the bench's scale-podset
// row). Here each status write is held for a second; all 24 sets are
// queued by the manager's initial list.
func TestPodSetsAreSyncedSixteenAtOnce(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	for i := range 24 {
		env.Create(t, newPodSet(ns, fmt.Sprintf("overlap-%02d", i), 1))
	}
	var inflight, peak atomic.Int64
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return faultinject.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/status") && strings.Contains(req.URL.Path, "/namespaces/"+ns+"/podsets/") {
				n := inflight.Add(1)
				defer inflight.Add(-1)
				for p := peak.Load(); n > p; p = peak.Load() {
					if peak.CompareAndSwap(p, n) {
						break
					}
				}
				time.Sleep(time.Second)
			}
			return rt.RoundTrip(req)
		})
	})
	opts := env.ManagerOptions()
	opts.Controllers = []string{podsetcontroller.ControllerName}
	env.StartManagerWithConfig(t, cfg, opts)
	g.Eventually(func() int {
		list := &appsv1beta1.PodSetList{}
		g.Expect(env.Client.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
		written := 0
		for _, s := range list.Items {
			if s.Status.ObservedGeneration == s.Generation {
				written++
			}
		}
		return written
	}, time.Minute, 100*time.Millisecond).Should(Equal(24))
	g.Expect(peak.Load()).To(BeEquivalentTo(16), "PodSet status writes in flight at once")
}

// currentSets lists the sets in ns whose status is current (isCurrent).
func currentSets(g Gomega, ns string, size int32) []string {
	list := &appsv1beta1.PodSetList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for i := range list.Items {
		if isCurrent(&list.Items[i], size, nil) {
			out = append(out, list.Items[i].Name)
		}
	}
	return out
}

// isCurrent says whether s's status shows size ready pods at its generation,
// pods named as many, none of them its pod in gone.
func isCurrent(s *appsv1beta1.PodSet, size int32, gone map[string]string) bool {
	st := s.Status
	return st.ObservedGeneration == s.Generation && st.Replicas == size && st.ReadyReplicas == size &&
		len(st.PodNames) == int(size) && !slices.Contains(st.PodNames, gone[s.Name])
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// testKubelet marks every pod of its namespace running and ready, as a
// kubelet would, and remembers when it last did so for each PodSet.
type testKubelet struct {
	ns    string
	mu    sync.Mutex
	ready map[string]time.Time // PodSet name: when its last pod was marked ready
}

func newTestKubelet(ns string) *testKubelet {
	return &testKubelet{ns: ns, ready: map[string]time.Time{}}
}

func (k *testKubelet) reset() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ready = map[string]time.Time{}
}

func (k *testKubelet) lastReady() map[string]time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ready
}

func (k *testKubelet) run(ctx context.Context, c client.WithWatch) {
	w, err := c.Watch(ctx, &corev1.PodList{}, client.InNamespace(k.ns))
	if err != nil {
		panic(fmt.Sprintf("watching pods: %v", err))
	}
	defer w.Stop()
	work := make(chan *corev1.Pod, 100)
	defer close(work)
	for range 4 {
		go func() {
			for p := range work {
				p.Status.Phase = corev1.PodRunning
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
				if env.Client.Status().Update(ctx, p) != nil {
					continue
				}
				at := time.Now()
				k.mu.Lock()
				set := metav1.GetControllerOf(p).Name
				k.ready[set] = later(k.ready[set], at)
				k.mu.Unlock()
			}
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			p, ok := ev.Object.(*corev1.Pod)
			if ok && ev.Type == watch.Added && p.Status.Phase != corev1.PodRunning && metav1.GetControllerOf(p) != nil {
				work <- p
			}
		}
	}
}

// gaugeValue is the value of a gauge of controller-runtime's registry whose
// name label is name.
func gaugeValue(metric, name string) float64 {
	for _, m := range gathered(metric) {
		if hasLabel(m, "name", name) {
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// histogram is a histogram of controller-runtime's registry at one moment.
type histogram struct {
	count   uint64
	sum     float64
	buckets []*dto.Bucket
}

// histogramOf is the histogram metric of the PodSet controller, whose label
// names it.
func histogramOf(metric, label string) histogram {
	for _, m := range gathered(metric) {
		if hasLabel(m, label, podsetcontroller.ControllerName) {
			h := m.GetHistogram()
			return histogram{count: h.GetSampleCount(), sum: h.GetSampleSum(), buckets: h.GetBucket()}
		}
	}
	return histogram{}
}

// since says how many samples h gained after before, their mean and the
// bucket their p99 falls in.
func (h histogram) since(before histogram) string {
	n := h.count - before.count
	if n == 0 {
		return "no samples"
	}
	p99 := -1.0
	for i, b := range h.buckets {
		c := b.GetCumulativeCount()
		if i < len(before.buckets) {
			c -= before.buckets[i].GetCumulativeCount()
		}
		if float64(c) >= 0.99*float64(n) {
			p99 = b.GetUpperBound()
			break
		}
	}
	return fmt.Sprintf("n=%d mean %.1f ms p99 <= %g s", n, 1000*(h.sum-before.sum)/float64(n), p99)
}

func gathered(metric string) []*dto.Metric {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		return nil
	}
	for _, f := range families {
		if f.GetName() == metric {
			return f.GetMetric()
		}
	}
	return nil
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
