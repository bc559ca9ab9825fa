//go:build bench

package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// setStatus is what the failover row reads of a set's status (a PodSet's
// or a ReplicaSet's).
type setStatus struct {
	generation, observed int64
	replicas, ready      int32
}

// statusTracker follows the statuses of a namespace's sets through a watch:
// each set's status as last seen, when its counts last changed and how many
// status writes it had since mark. A watch, not a List every 100 ms: a List
// of 1,000 PodSets (each naming its pods) is megabytes the apiserver
// encodes on the same two cores as the writes it measures.
type statusTracker struct {
	mu      sync.Mutex
	status  map[string]setStatus
	changed map[string]time.Time // set → when its counts last changed
	writes  map[string]int       // set → status writes seen since mark
	stop    chan struct{}
}

// trackStatuses starts following the sets of obj's kind in ns (list is its
// list type); read takes a set's status from one of them.
func (b *bench) trackStatuses(ns string, obj client.Object, list client.ObjectList, read func(client.Object) setStatus) *statusTracker {
	wc, err := client.NewWithWatch(b.c.Config, client.Options{Scheme: b.c.Client.Scheme()})
	b.must(err)
	st := &statusTracker{status: map[string]setStatus{}, changed: map[string]time.Time{}, writes: map[string]int{}, stop: make(chan struct{})}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, _ := list.DeepCopyObject().(client.ObjectList)
			return l, wc.List(ctx, l, client.InNamespace(ns), &client.ListOptions{Raw: &o})
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			l, _ := list.DeepCopyObject().(client.ObjectList)
			return wc.Watch(ctx, l, client.InNamespace(ns), &client.ListOptions{Raw: &o})
		},
	}
	_, inf := cache.NewInformerWithOptions(cache.InformerOptions{ListerWatcher: lw, ObjectType: obj,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { st.observe(nil, o.(client.Object), read) },
			UpdateFunc: func(old, o any) { st.observe(old.(client.Object), o.(client.Object), read) },
		}})
	ctx, cancel := context.WithCancel(b.ctx)
	go func() { <-st.stop; cancel() }()
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(st.stop, inf.HasSynced) {
		b.t.Fatalf("the watch of %T in %s did not sync", obj, ns)
	}
	return st
}

func (st *statusTracker) observe(old, cur client.Object, read func(client.Object) setStatus) {
	now := read(cur)
	st.mu.Lock()
	defer st.mu.Unlock()
	if old != nil && old.GetResourceVersion() == cur.GetResourceVersion() {
		return // a relist's, not a write
	}
	if old != nil && old.GetGeneration() == cur.GetGeneration() {
		st.writes[cur.GetName()]++
	}
	if st.status[cur.GetName()] != now {
		st.changed[cur.GetName()] = time.Now()
	}
	st.status[cur.GetName()] = now
}

// mark starts counting status writes afresh.
func (st *statusTracker) mark() {
	st.mu.Lock()
	defer st.mu.Unlock()
	clear(st.writes)
}

// behind counts the sets of want whose status does not show their wanted
// size ready, for their current generation.
func (st *statusTracker) behind(want map[string]int) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	n := 0
	for set, w := range want {
		s := st.status[set]
		if s.observed != s.generation || int(s.ready) != w || int(s.replicas) != w {
			n++
		}
	}
	return n
}

// trail is how long each set of want's status came after its pods' last
// change (in seconds, sorted), and the status writes a set had since mark,
// on average.
func (st *statusTracker) trail(tr *setTracker, want map[string]int) ([]float64, float64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := make([]float64, 0, len(want))
	writes := 0
	for set := range want {
		out = append(out, max(0, st.changed[set].Sub(tr.changed[set]).Seconds()))
		writes += st.writes[set]
	}
	slices.Sort(out)
	return out, float64(writes) / float64(len(want))
}

// queueSeries samples a manager's podset workqueue and requests once a
// second until stop is closed, and returns the samples as text, one line a
// second: depth, syncs, PATCH and POST requests so far.
func (b *bench) queueSeries(m *managerProcess, stop <-chan struct{}) <-chan string {
	out := make(chan string, 1)
	go func() {
		var sb strings.Builder
		began := time.Now()
		sb.WriteString("s\tdepth\tsyncs\tPATCH\tPOST\n")
		for {
			if s, err := b.scrape(m); err == nil {
				ctl, q := label("controller", "podset"), label("name", "podset")
				fmt.Fprintf(&sb, "%.1f\t%.0f\t%.0f\t%.0f\t%.0f\n", time.Since(began).Seconds(),
					s.sum("workqueue_depth", q), s.sum("controller_runtime_reconcile_total", ctl),
					s.sum("rest_client_requests_total", label("method", "PATCH")), s.sum("rest_client_requests_total", label("method", "POST")))
			}
			select {
			case <-stop:
				out <- sb.String()
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return out
}

// quantile estimates the q quantile of a histogram's observations between
// two scrapes from its buckets (Prometheus's histogram_quantile, linear
// within a bucket), and says the bucket it lies in: with buckets a factor of
// ten wide, as the workqueue's are, the estimate may be far from any
// observation, the bucket never is.
func quantile(before, after metrics, name string, match func(map[string]string) bool, q float64) (estimate, lo, hi float64) {
	counts := map[float64]float64{}
	for sign, m := range map[float64]metrics{-1: before, 1: after} {
		for _, s := range m {
			if s.name != name+"_bucket" || (match != nil && !match(s.labels)) {
				continue
			}
			le, err := strconv.ParseFloat(s.labels["le"], 64)
			if err == nil {
				counts[le] += sign * s.value
			}
		}
	}
	bounds := slices.Sorted(func(yield func(float64) bool) {
		for le := range counts {
			if !yield(le) {
				return
			}
		}
	})
	if len(bounds) == 0 || counts[math.Inf(1)] == 0 {
		return 0, 0, 0
	}
	rank, prevBound, prevCount := q*counts[math.Inf(1)], 0.0, 0.0
	for _, le := range bounds {
		if counts[le] >= rank {
			if math.IsInf(le, 1) {
				return prevBound, prevBound, le
			}
			return prevBound + (le-prevBound)*(rank-prevCount)/(counts[le]-prevCount), prevBound, le
		}
		prevBound, prevCount = le, counts[le]
	}
	return prevBound, prevBound, math.Inf(1)
}

// quantileText is quantile's estimate in seconds with its bucket.
func quantileText(before, after metrics, name string, match func(map[string]string) bool, q float64) string {
	estimate, lo, hi := quantile(before, after, name, match, q)
	return fmt.Sprintf("%.3g s (bucket %g–%g s)", estimate, lo, hi)
}
