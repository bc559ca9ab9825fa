//go:build bench

package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/proc"
	"github.com/deckhand-dev/deckhand/test/cluster"
)

func init() { scaleRows["scale-podset"] = (*bench).scalePodSetRow }

// The PodSet failover row (issue 26): N pods under N/10 PodSets of 10, two
// managers with leader election as shipped (Lease 15 s, renew 10 s, retry
// 500 ms), the leader killed with SIGKILL; against kube-controller-manager
// killed and started again with the same number of ReplicaSets of 10.
//
// Two failovers per side, on the same sets:
//
//  1. Fresh changes. Right after the kill one set is scaled 10→11 (a
//     change that waits for the new leader): "first write" is the time from
//     the kill until its new pod exists. Once the new leader leads (the
//     standby logs "elected leader"; kube-controller-manager is started
//     again), freshChanges more sets are scaled 10→11, one every 100 ms,
//     while the new leader works through its initial list: each one's lag
//     is from its patch until its new pod exists; the row reports the p99.
//  2. Every set current. While no leader runs, one pod of every set is
//     deleted; the time until every set again has its size of Running pods
//     and a status that says so (readyReplicas and observedGeneration), from
//     the moment the new leader could act (the later of its takeover and the
//     last deletion; kube-controller-manager: started again after the
//     deletions), and from the kill.
//
// kube-controller-manager runs without leader election in the local
// cluster, so it has no Lease to wait for: "from the kill" includes
// Deckhand's Lease wait and only the restart for kube-controller-manager;
// "from the takeover" compares the two controllers' work.
const (
	scaleSetSize = 10
	freshChanges = 30
)

var scaleSetLabels = map[string]string{"app": "bench-scale"}

func (b *bench) scalePodSetRow() {
	for _, n := range b.s.sizes {
		b.scalePodSetAt(n)
	}
}

// failoverFigures are one side's measurements of one N.
type failoverFigures struct {
	takeover, firstWrite, freshP99, freshMax float64
	currentFromTakeover, currentFromKill     float64
	podsFromTakeover                         float64
	setup                                    float64
	// After the second failover: how far each set's status came after its
	// pods (seconds, sorted) and the status writes a set had from the kill.
	trail        []float64
	statusWrites float64
}

func (b *bench) scalePodSetAt(n int) {
	sets := max(1, n/scaleSetSize)
	size := min(n, scaleSetSize)
	ps := b.podSetFailover(sets, size)
	// Each side's figures are printed as soon as measured: a run whose other
	// side fails (at 50,000 pods, kube-controller-manager's ReplicaSets did
	// not all become current within 30 minutes) keeps them.
	fmt.Printf("bench: PodSet failover, %d sets of %d, Deckhand's side: %s\n", sets, size, ps)
	rs := b.replicaSetRestart(sets, size)
	fmt.Printf("bench: kube-controller-manager restart, %d sets of %d: %s\n", sets, size, rs)
	row := fmt.Sprintf("PodSet failover vs kube-controller-manager restart, %d sets of %d", sets, size)
	add := func(metric string, d, a float64) *figure {
		return b.rep.add(&figure{Row: row, Metric: metric, Unit: "s", N: sets * size}, []float64{d}, []float64{a})
	}
	add("setup: sets made, every pod Running", ps.setup, rs.setup)
	add("takeover (kill → new leader leads)", ps.takeover, rs.takeover)
	f := add("first write (kill → a change made at the kill acted on)", ps.firstWrite, rs.firstWrite)
	f.judge("≤ Lease + 2 s (17 s)", f.Deckhand <= 17)
	// What warm standby is for: once it leads, the new leader writes at
	// once (the Lease's own timing, up to RetryPeriod × 2.2 after it
	// expires, is client-go's).
	f = add("first write after the takeover", ps.firstWrite-ps.takeover, rs.firstWrite-rs.takeover)
	f.judge("≤ 2 s", f.Deckhand <= 2)
	f = add(fmt.Sprintf("fresh change acted on, p99 of %d", freshChanges), ps.freshP99, rs.freshP99)
	f.judge("≤ 1 s", f.Deckhand <= 1)
	add(fmt.Sprintf("fresh change acted on, max of %d", freshChanges), ps.freshMax, rs.freshMax)
	// The pods apart from the statuses: which of the two a miss is in.
	add("every set's pods Running again, from the takeover", ps.podsFromTakeover, rs.podsFromTakeover)
	f = add("every set current, from the takeover", ps.currentFromTakeover, rs.currentFromTakeover)
	f.judgeRatio("≤ 1.0×", 1.0)
	add("every set current, from the kill", ps.currentFromKill, rs.currentFromKill)
	// Where the statuses' time goes: a set's status after its own pods'
	// last change, and how many writes each set's status took.
	for _, q := range []float64{50, 99, 100} {
		add(fmt.Sprintf("a set's status after its pods, p%.0f", q), percentile(ps.trail, q), percentile(rs.trail, q))
	}
	b.rep.add(&figure{Row: row, Metric: "status writes a set, from the kill until current", N: sets * size},
		[]float64{ps.statusWrites}, []float64{rs.statusWrites})
}

// trackPodSetStatuses follows the statuses of ns's PodSets.
func (b *bench) trackPodSetStatuses(ns string) *statusTracker {
	return b.trackStatuses(ns, &appsv1beta1.PodSet{}, &appsv1beta1.PodSetList{}, func(o client.Object) setStatus {
		s := o.(*appsv1beta1.PodSet)
		return setStatus{generation: s.Generation, observed: s.Status.ObservedGeneration, replicas: s.Status.Replicas, ready: s.Status.ReadyReplicas}
	})
}

// trackReplicaSetStatuses follows the statuses of ns's ReplicaSets.
func (b *bench) trackReplicaSetStatuses(ns string) *statusTracker {
	return b.trackStatuses(ns, &appsv1.ReplicaSet{}, &appsv1.ReplicaSetList{}, func(o client.Object) setStatus {
		s := o.(*appsv1.ReplicaSet)
		return setStatus{generation: s.Generation, observed: s.Status.ObservedGeneration, replicas: s.Status.Replicas, ready: s.Status.ReadyReplicas}
	})
}

// String tells the figures in seconds, as the row's figures name them.
func (f failoverFigures) String() string {
	return fmt.Sprintf("setup %.1f, takeover %.2f, first write %.2f, fresh change p99 %.2f max %.2f, pods Running again %.1f, "+
		"every set current %.1f from the takeover (%.1f from the kill), a set's status after its pods p50 %.2f p99 %.2f, status writes a set %.2f",
		f.setup, f.takeover, f.firstWrite, f.freshP99, f.freshMax, f.podsFromTakeover, f.currentFromTakeover, f.currentFromKill,
		percentile(f.trail, 50), percentile(f.trail, 99), f.statusWrites)
}

// podSetFailover runs the Deckhand side: managers A (leader), B and C
// (standbys, each taking over in turn).
func (b *bench) podSetFailover(sets, size int) failoverFigures {
	var out failoverFigures
	ns := b.namespace("scale-podset", nil)
	defer b.dropNamespace(ns)
	flags := []string{"--leader-elect=true", "--leader-election-id", "deckhand-scale-" + ns,
		"--controllers", "podset", "--zap-log-level", "info"}
	leader := b.c.RunManager(b.t, flags...)
	b.waitLog(leader, electedLog)
	tr := b.trackSets(ns)
	defer close(tr.stop)
	st := b.trackPodSetStatuses(ns)
	defer close(st.stop)

	began := time.Now()
	b.must(parallel(sets, 32, func(i int) error {
		return b.c.Client.Create(b.ctx, &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: setName(i)},
			Spec: appsv1beta1.PodSetSpec{Replicas: int32(size), Template: ptr.To(scaleTemplate(setName(i)))}})
	}))
	want := tr.want(sets, size)
	b.waitCurrent(tr, st, want, "PodSets made")
	out.setup = time.Since(began).Seconds()

	// 1. Fresh changes.
	standby := b.c.RunManager(b.t, flags...)
	if err := leader.Signal(syscall.SIGKILL); err != nil {
		b.t.Fatalf("killing the leader: %v", err)
	}
	killed := time.Now()
	<-leader.Done()
	scale := func(i int) error {
		return b.c.Client.Patch(b.ctx, &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: setName(i)}},
			client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, size+1)))
	}
	out.takeover, out.firstWrite, out.freshP99, out.freshMax = b.freshChanges(tr, sets, size, killed, scale,
		func() time.Time { b.waitLog(standby, electedLog); return time.Now() })

	// 2. Every set current after one pod of each was deleted while no
	// replica led.
	// The third manager's metrics say what its queue did (bin/bench/failover-<N>-queue.tsv).
	addr := testenv.FreeAddr(b.t)
	third := b.c.RunManager(b.t, append(slices.Clone(flags), "--metrics-bind-address", addr)...)
	defer third.Stop() // the next N's managers must be the only ones acting
	m := &managerProcess{p: third, metricsURL: "https://" + addr + "/metrics"}
	before, apiBefore := b.mustScrape(m), b.apiserverMetrics()
	if err := standby.Signal(syscall.SIGKILL); err != nil {
		b.t.Fatalf("killing the leader: %v", err)
	}
	killed = time.Now()
	<-standby.Done()
	st.mark()
	stopSeries := make(chan struct{})
	series := b.queueSeries(m, stopSeries)
	deleted := b.deleteOnePodEach(ns, tr, sets)
	b.waitLog(third, electedLog)
	from := time.Now()
	if deleted.After(from) {
		from = deleted
	}
	want = tr.want(sets, size)
	for i := range min(sets, freshChanges+1) {
		want[setName(i)] = size + 1
	}
	podsDone := b.waitCurrent(tr, st, want, "PodSets current after the failover")
	out.currentFromTakeover, out.currentFromKill = time.Since(from).Seconds(), time.Since(killed).Seconds()
	out.podsFromTakeover = podsDone.Sub(from).Seconds()
	close(stopSeries)
	after, apiAfter := b.mustScrape(m), b.apiserverMetrics()
	out.trail, out.statusWrites = st.trail(tr, want)
	q := label("name", "podset")
	fmt.Printf("bench: PodSet failover, %d sets: %.2f syncs a set; queue wait p50 %s, p99 %s; sync p50 %s, p99 %s; requests a set: %s\n",
		sets, (after.sum("controller_runtime_reconcile_total", label("controller", "podset"))-before.sum("controller_runtime_reconcile_total", label("controller", "podset")))/float64(sets),
		quantileText(before, after, "workqueue_queue_duration_seconds", q, 0.5), quantileText(before, after, "workqueue_queue_duration_seconds", q, 0.99),
		quantileText(before, after, "workqueue_work_duration_seconds", q, 0.5), quantileText(before, after, "workqueue_work_duration_seconds", q, 0.99),
		requestsPerObject(apiBefore, apiAfter, sets))
	// The new leader's log (reconcile errors and their retries, which the
	// queue's rate limiter paces) and its queue, a second at a time, are
	// kept, to tell what its statuses wait for after the pods.
	b.must(keepBenchFile(fmt.Sprintf("failover-%d.log", sets*size), []byte(third.Logs())))
	b.must(keepBenchFile(fmt.Sprintf("failover-%d-queue.tsv", sets*size), []byte(<-series)))
	return out
}

// replicaSetRestart runs the alternative: the same sets as ReplicaSets,
// kube-controller-manager killed and started again, twice.
func (b *bench) replicaSetRestart(sets, size int) failoverFigures {
	var out failoverFigures
	ns := b.namespace("scale-replicaset", nil)
	defer b.dropNamespace(ns)
	tr := b.trackSets(ns)
	defer close(tr.stop)
	st := b.trackReplicaSetStatuses(ns)
	defer close(st.stop)
	began := time.Now()
	b.must(parallel(sets, 32, func(i int) error {
		labels := scaleTemplate(setName(i)).Labels
		_, err := b.c.Clientset.AppsV1().ReplicaSets(ns).Create(b.ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: setName(i)},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(size)), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: scaleTemplate(setName(i))}}, metav1.CreateOptions{})
		return err
	}))
	want := tr.want(sets, size)
	b.waitCurrent(tr, st, want, "ReplicaSets made")
	out.setup = time.Since(began).Seconds()

	const kcm = "kube-controller-manager"
	// 1. Fresh changes.
	b.must(b.c.KillComponent(kcm))
	killed := time.Now()
	scale := func(i int) error {
		_, err := b.c.Clientset.AppsV1().ReplicaSets(ns).Patch(b.ctx, setName(i), types.MergePatchType,
			fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, size+1), metav1.PatchOptions{})
		return err
	}
	out.takeover, out.firstWrite, out.freshP99, out.freshMax = b.freshChanges(tr, sets, size, killed, scale,
		func() time.Time { return b.restart(kcm) })

	// 2. Every set current after one pod of each was deleted while it was
	// away.
	apiBefore := b.apiserverMetrics()
	b.must(b.c.KillComponent(kcm))
	killed = time.Now()
	st.mark()
	b.deleteOnePodEach(ns, tr, sets)
	from := b.restart(kcm)
	want = tr.want(sets, size)
	for i := range min(sets, freshChanges+1) {
		want[setName(i)] = size + 1
	}
	podsDone := b.waitCurrent(tr, st, want, "ReplicaSets current after the restart")
	out.currentFromTakeover, out.currentFromKill = time.Since(from).Seconds(), time.Since(killed).Seconds()
	out.podsFromTakeover = podsDone.Sub(from).Seconds()
	out.trail, out.statusWrites = st.trail(tr, want)
	fmt.Printf("bench: kube-controller-manager restart, %d sets: requests a set: %s\n", sets, requestsPerObject(apiBefore, b.apiserverMetrics(), sets))
	return out
}

// freshChanges measures a failover's first write and fresh changes: set 0
// scaled at once (the kill was at killed), takeover() waits for the new
// leader and says when it began to lead (kube-controller-manager: when its
// process started), then sets 1… are scaled one every 100 ms. It returns
// the takeover, the first write and the p99 and max lag of the fresh
// changes, in seconds.
func (b *bench) freshChanges(tr *setTracker, sets, size int, killed time.Time, scale func(i int) error, takeover func() time.Time) (float64, float64, float64, float64) {
	b.t.Helper()
	tr.expect(setName(0), size+1, killed)
	b.must(scale(0))
	took := takeover().Sub(killed).Seconds()
	changes := min(freshChanges, sets-1)
	for i := 1; i <= changes; i++ {
		tr.expect(setName(i), size+1, time.Now())
		b.must(scale(i))
		time.Sleep(100 * time.Millisecond)
	}
	lags := make([]float64, 0, changes)
	for i := 0; i <= changes; i++ {
		lag := tr.lag(b, setName(i))
		if i > 0 {
			lags = append(lags, lag)
		}
	}
	first := tr.lag(b, setName(0))
	if len(lags) == 0 {
		return took, first, 0, 0
	}
	return took, first, percentile(lags, 99), percentile(lags, 100)
}

// deleteOnePodEach deletes one live pod of every set and returns when the
// last deletion was answered and the tracker saw every one (so that no set
// looks current only because the tracker is behind).
func (b *bench) deleteOnePodEach(ns string, tr *setTracker, sets int) time.Time {
	b.t.Helper()
	victims := tr.onePodEach(sets)
	b.must(parallel(len(victims), 64, func(i int) error {
		return b.c.Clientset.CoreV1().Pods(ns).Delete(b.ctx, victims[i].pod, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	}))
	deleted := time.Now()
	b.must(wait.PollUntilContextTimeout(b.ctx, 20*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		for _, v := range victims {
			if tr.alive[v.set][v.pod] {
				return false, nil
			}
		}
		return true, nil
	}))
	return deleted
}

// restart starts the cluster's stopped components again and returns when
// component's process appeared (to within 20 ms): kube-controller-manager
// starts listing the moment its process does, before the script that
// started it returns.
func (b *bench) restart(component string) time.Time {
	b.t.Helper()
	seen := make(chan time.Time, 1)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if b.running(component) {
				seen <- time.Now()
				return
			}
		}
	}()
	err := b.c.StartComponents()
	close(stop)
	b.must(err)
	select {
	case at := <-seen:
		return at
	default:
		return time.Now() // started and seen only after the script returned
	}
}

// running reports whether a process of the cluster's component runs.
func (b *bench) running(component string) bool {
	pid, err := proc.Find("/clusters/" + b.c.Name + "/bin/" + component)
	return err == nil && pid != 0
}

func setName(i int) string { return fmt.Sprintf("set-%d", i) }

// scaleTemplate is benchTemplate with a label of the set's own, so that
// ReplicaSets in one namespace do not select each other's pods.
func scaleTemplate(set string) corev1.PodTemplateSpec {
	t := benchTemplate()
	t.Labels = map[string]string{"app": scaleSetLabels["app"], "bench.deckhand.dev/set": set}
	return t
}

const electedLog = `"elected leader"`

// waitLog waits until the manager's log has line, or fails the run.
func (b *bench) waitLog(p *cluster.Process, line string) {
	b.t.Helper()
	err := wait.PollUntilContextTimeout(b.ctx, 50*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		return strings.Contains(p.Logs(), line), nil
	})
	if err != nil {
		b.t.Fatalf("no %s in the manager's log after 5 minutes", line)
	}
}

// setTracker follows the pods of a namespace's sets through an informer:
// which are alive and Running per set, and when a set expected to grow
// first had its new size of pods.
type setTracker struct {
	mu       sync.Mutex
	alive    map[string]map[string]bool // set → pod names not deleted or finished
	running  map[string]map[string]bool
	changed  map[string]time.Time // set → when a pod of it last changed
	expected map[string]expectation
	stop     chan struct{}
}

type expectation struct {
	size       int
	since, met time.Time
}

func (b *bench) trackSets(ns string) *setTracker {
	tr := &setTracker{alive: map[string]map[string]bool{}, running: map[string]map[string]bool{}, changed: map[string]time.Time{},
		expected: map[string]expectation{}, stop: make(chan struct{})}
	f := informers.NewSharedInformerFactoryWithOptions(b.c.Clientset, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "app=" + scaleSetLabels["app"] }))
	inf := f.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { tr.observe(o.(*corev1.Pod), false) },
		UpdateFunc: func(_, o any) { tr.observe(o.(*corev1.Pod), false) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if p, ok := o.(*corev1.Pod); ok {
				tr.observe(p, true)
			}
		},
	})
	b.must(err)
	f.Start(tr.stop)
	f.WaitForCacheSync(tr.stop)
	return tr
}

func (tr *setTracker) observe(p *corev1.Pod, deleted bool) {
	set := p.Labels["bench.deckhand.dev/set"]
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.changed[set] = time.Now()
	gone := deleted || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	for m, in := range map[*map[string]map[string]bool]bool{&tr.alive: !gone, &tr.running: !gone && p.Status.Phase == corev1.PodRunning} {
		if (*m)[set] == nil {
			(*m)[set] = map[string]bool{}
		}
		if in {
			(*m)[set][p.Name] = true
		} else {
			delete((*m)[set], p.Name)
		}
	}
	if e, ok := tr.expected[set]; ok && e.met.IsZero() && len(tr.alive[set]) >= e.size {
		e.met = time.Now()
		tr.expected[set] = e
	}
}

// expect starts the clock of a set's growth to size.
func (tr *setTracker) expect(set string, size int, since time.Time) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.expected[set] = expectation{size: size, since: since}
}

// lag waits until the set grew as expected and returns how long it took.
func (tr *setTracker) lag(b *bench, set string) float64 {
	b.t.Helper()
	var out float64
	err := wait.PollUntilContextTimeout(b.ctx, 20*time.Millisecond, 10*time.Minute, true, func(context.Context) (bool, error) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		e := tr.expected[set]
		out = e.met.Sub(e.since).Seconds()
		return !e.met.IsZero(), nil
	})
	if err != nil {
		b.t.Fatalf("%s did not grow within 10 minutes", set)
	}
	return out
}

// want is every set at size.
func (tr *setTracker) want(sets, size int) map[string]int {
	out := make(map[string]int, sets)
	for i := range sets {
		out[setName(i)] = size
	}
	return out
}

// victim is a pod of a set.
type victim struct{ set, pod string }

// onePodEach names one live pod of each set.
func (tr *setTracker) onePodEach(sets int) []victim {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := make([]victim, 0, sets)
	for i := range sets {
		for name := range tr.alive[setName(i)] {
			out = append(out, victim{set: setName(i), pod: name})
			break
		}
	}
	return out
}

// behind counts the sets of want that do not have exactly their size of
// live pods, all Running.
func (tr *setTracker) behind(want map[string]int) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for set, size := range want {
		if len(tr.alive[set]) != size || len(tr.running[set]) != size {
			n++
		}
	}
	return n
}

// waitCurrent waits until every set's pods are as wanted and every set's
// status shows it, for up to currentBound(len(want)), saying every five
// minutes how far it came (a run that misses the bound tells how far
// short). It returns when the pods first were as wanted.
func (b *bench) waitCurrent(tr *setTracker, st *statusTracker, want map[string]int, what string) time.Time {
	b.t.Helper()
	var podsDone time.Time
	began, said := time.Now(), time.Now()
	bound := currentBound(len(want))
	progress := func() string {
		return fmt.Sprintf("%d of %d sets' pods as wanted, %d statuses current", len(want)-tr.behind(want), len(want), len(want)-st.behind(want))
	}
	err := wait.PollUntilContextTimeout(b.ctx, 100*time.Millisecond, bound, true, func(context.Context) (bool, error) {
		if time.Since(said) >= 5*time.Minute {
			said = time.Now()
			fmt.Printf("bench: %s: after %s, %s\n", what, time.Since(began).Round(time.Second), progress())
		}
		podsAsWanted := tr.behind(want) == 0
		if podsAsWanted && podsDone.IsZero() {
			podsDone = time.Now()
		}
		return podsAsWanted && st.behind(want) == 0, nil
	})
	if err != nil {
		b.t.Fatalf("%s: not current after %s: %s", what, bound, progress())
	}
	return podsDone
}

// currentBound is how long sets may take to become current: 30 minutes,
// and a minute for every 100 sets beyond 3,000 (at 50,000 pods, 5,000
// ReplicaSets made by kube-controller-manager were not all current after
// 30 minutes on a 2-core machine).
func currentBound(sets int) time.Duration {
	return 30*time.Minute + time.Duration(max(0, sets-3000)/100)*time.Minute
}
