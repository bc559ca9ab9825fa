//go:build bench

package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

func init() { scaleRows["scale-jobwatcher"] = (*bench).scaleJobWatcherRow }

// The scale row's Jobs are finished by the bench, not by pods: each is
// created with spec.managedBy naming the bench, so the Job controller leaves
// it alone, and its status is then written as the Job controller writes a
// success (testenv.FinishJob), at a time the bench chooses. Both sides see
// the same Jobs: JobWatcher and the TTL-after-finished controller judge a
// Job by its finished condition alone. N finished Jobs cost 2N requests and
// no pod, so 100,000 fit a small machine.
const benchJobManager = "bench.deckhand.dev/finished"

const (
	scaleChurnTTL      = 5                // seconds, both sides of the churn
	scaleChurnRate     = 10               // Jobs a second on each side
	scaleChurnFor      = 30 * time.Second // per round
	scaleBacklogTTL    = 60               // seconds; the backlog finished an hour ago
	scaleOtherTTL      = 2                // seconds: the other watcher's Jobs during a drain
	scaleKeptTTL       = 24 * 3600        // the N Jobs present are not due during the run
	scaleDrainDeadline = 60 * time.Minute
)

// createFinishedJobs creates Jobs prefix-from … prefix-(to-1) in ns,
// finished (Complete) at at, with ownTTL as spec.ttlSecondsAfterFinished
// when it is set, from 64 parallel clients.
func (b *bench) createFinishedJobs(ns, prefix string, from, to int, labels map[string]string, at time.Time, ownTTL *int32) {
	b.t.Helper()
	b.must(parallel(to-from, 64, func(i int) error { return b.finishedJob(ns, fmt.Sprintf("%s-%d", prefix, from+i), labels, at, ownTTL) }))
}

func (b *bench) finishedJob(ns, name string, labels map[string]string, at time.Time, ownTTL *int32) error {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: batchv1.JobSpec{ManagedBy: ptr.To(benchJobManager), TTLSecondsAfterFinished: ownTTL,
			Template: corev1.PodTemplateSpec{Spec: benchPodSpec()}}}
	job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	created, err := b.c.Clientset.BatchV1().Jobs(ns).Create(b.ctx, job, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	testenv.FinishJob(created, batchv1.JobComplete, at)
	_, err = b.c.Clientset.BatchV1().Jobs(ns).UpdateStatus(b.ctx, created, metav1.UpdateOptions{})
	return err
}

// jobWatcher creates a JobWatcher in ns deleting succeeded Jobs ttl
// seconds after they finished, allowed to delete as many a minute as the
// API takes (the default circuit breaker stops at 1,000 a minute: a backlog
// is what it is there to question).
func (b *bench) jobWatcher(ns string, ttl int32) {
	b.t.Helper()
	b.must(b.c.Client.Create(b.ctx, &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scale"},
		Spec: deckhandbatchv1.JobWatcherSpec{JobPolicy: deckhandbatchv1.JobPolicy{TTLSecondsAfterSucceeded: ptr.To(ttl),
			MaxDeletionsPerMinute: ptr.To[int32](100000)}}}))
}

// churn creates a finished Job a side every 1/rate s in each namespace of
// sides (side name → namespace; a side whose name is "ttl" gets its own
// TTL), labelled bench-round=round, until stop is closed; it returns when
// the last creation is done.
func (b *bench) churn(stop <-chan struct{}, round string, rate int, sides map[string]string, ttl int32) <-chan error {
	done := make(chan error, 1)
	go func() {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var first error
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				wg.Wait()
				done <- first
				return
			case <-tick.C:
			}
			// Whole seconds: a condition's time is written to the second,
			// and both controllers read that.
			at := time.Now().Truncate(time.Second)
			for side, ns := range sides {
				var own *int32
				if side == "ttl" {
					own = ptr.To(ttl)
				}
				wg.Go(func() {
					err := b.finishedJob(ns, fmt.Sprintf("churn-%d", i), map[string]string{"bench-round": round, "bench-side": side}, at, own)
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				})
			}
		}
	}()
	return done
}

// waitDeleted waits until tr saw want Jobs deleted, or fails the run after
// deadline.
func (b *bench) waitDeleted(tr *jobTracker, want int, deadline time.Duration, what string) time.Time {
	b.t.Helper()
	err := wait.PollUntilContextTimeout(b.ctx, 50*time.Millisecond, deadline, true, func(context.Context) (bool, error) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return len(tr.deleted) >= want, nil
	})
	if err != nil {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		b.t.Fatalf("%s: %d of %d Jobs deleted after %s", what, len(tr.deleted), want, deadline)
	}
	return tr.lastDeleted("")
}

// lastDeleted is when tr saw the last of side's Jobs ("": any side)
// deleted: the end of a drain, to the watch event, not to the poll that
// noticed it (which for the manager only starts once it is ready, after a
// backlog it deletes during its start).
func (tr *jobTracker) lastDeleted(side string) time.Time {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var last time.Time
	for uid, at := range tr.deleted {
		if (side == "" || tr.side[uid] == side) && at.After(last) {
			last = at
		}
	}
	return last
}

// lags are the deletion lags after the TTL of the Jobs tr saw deleted, by
// side, of those due at or after from.
func (tr *jobTracker) lags(ttl time.Duration, from time.Time) map[string][]float64 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := map[string][]float64{}
	for uid, at := range tr.deleted {
		fin, ok := tr.finished[uid]
		if !ok || fin.Add(ttl).Before(from) {
			continue
		}
		out[tr.side[uid]] = append(out[tr.side[uid]], at.Sub(fin.Add(ttl)).Seconds())
	}
	return out
}

// scaleJobWatcherRow: N finished Jobs present under a JobWatcher that keeps
// them (a day's TTL), at every N of BENCH_SIZES:
//   - (a) deletion lag after the TTL at steady churn, against the
//     TTL-after-finished controller with the same churn at the same time;
//   - (b) a backlog of N/10 Jobs past their TTL when the manager starts,
//     time until all are deleted, against kube-controller-manager restarted
//     with the same backlog; meanwhile another watcher's Jobs fall due, and
//     their lag tells whether the backlog starves them;
//   - (c) heap and RssAnon of a manager started fresh with the N Jobs, and
//     their slope per Job.
func (b *bench) scaleJobWatcherRow() {
	sizes := slices.Sorted(slices.Values(b.s.sizes))
	m := b.startManager()
	keptNS := b.namespace("scale-kept", nil)
	b.jobWatcher(keptNS, scaleKeptTTL)
	baseline := b.sampleMemory(m, "jobwatcher-0")
	mem := make([]memorySample, 0, len(sizes))
	have := 0
	for _, n := range sizes {
		started := time.Now()
		b.createFinishedJobs(keptNS, "kept", have, n, nil, time.Now().Add(-time.Minute), nil)
		have = n
		b.waitMatched(keptNS, n)
		fmt.Printf("bench: scale-jobwatcher N=%d: Jobs present in %s\n", n, time.Since(started).Round(time.Second))
		// (c) A manager started fresh against the N Jobs, as after an
		// install or a restart.
		m.p.Stop()
		m = b.startManager()
		mem = append(mem, b.sampleMemory(m, fmt.Sprintf("jobwatcher-%d", n)))
		// (a) Steady churn, both sides at once.
		var jw, kube struct{ p50, p99, max []float64 }
		for round := range b.s.repeat {
			jwNS, ttlNS := b.namespace("scale-churn", nil), b.namespace("scale-churn-ttl", nil)
			b.jobWatcher(jwNS, scaleChurnTTL)
			label := fmt.Sprintf("churn-%d-%d", n, round)
			tr := b.trackJobs("bench-round=" + label)
			stop := make(chan struct{})
			done := b.churn(stop, label, scaleChurnRate, map[string]string{"jobwatcher": jwNS, "ttl": ttlNS}, scaleChurnTTL)
			time.Sleep(scaleChurnFor)
			close(stop)
			b.must(<-done)
			time.Sleep(time.Second) // the informer's view of the last creations
			tr.mu.Lock()
			created := len(tr.side)
			tr.mu.Unlock()
			b.waitDeleted(tr, created, 10*time.Minute, "scale-jobwatcher churn")
			close(tr.stop)
			lags := tr.lags(scaleChurnTTL*time.Second, time.Time{})
			for side, into := range map[string]*struct{ p50, p99, max []float64 }{"jobwatcher": &jw, "ttl": &kube} {
				into.p50 = append(into.p50, percentile(lags[side], 50))
				into.p99 = append(into.p99, percentile(lags[side], 99))
				into.max = append(into.max, slices.Max(lags[side]))
			}
			b.dropNamespace(jwNS)
			b.dropNamespace(ttlNS)
		}
		fmt.Printf("bench: scale-jobwatcher N=%d: churn done at %s\n", n, time.Since(started).Round(time.Second))
		row := fmt.Sprintf("scale: JobWatcher vs TTL controller, N finished Jobs present, churn %d/s a side, TTL %ds", scaleChurnRate, scaleChurnTTL)
		b.rep.add(&figure{Row: row, Metric: "deletion lag after TTL, p50", Unit: "s", N: n}, jw.p50, kube.p50)
		f := b.rep.add(&figure{Row: row, Metric: "deletion lag after TTL, p99", Unit: "s", N: n}, jw.p99, kube.p99)
		f.judge("≤ 1 s", f.Deckhand <= 1)
		b.rep.add(&figure{Row: row, Metric: "deletion lag after TTL, max", Unit: "s", N: n}, jw.max, kube.max)

		// (b) The backlog.
		m = b.scaleBacklog(n, m)
		fmt.Printf("bench: scale-jobwatcher N=%d: done in %s\n", n, time.Since(started).Round(time.Second))
	}
	m.p.Stop()
	b.memoryFigures("scale: JobWatcher manager memory, N finished Jobs under a watcher", sizes, baseline, mem, 1024)
	b.dropNamespace(keptNS)
}

// waitMatched waits until the JobWatcher "scale" in ns counts n Jobs.
func (b *bench) waitMatched(ns string, n int) {
	b.t.Helper()
	err := wait.PollUntilContextTimeout(b.ctx, time.Second, 30*time.Minute, true, func(ctx context.Context) (bool, error) {
		jw := &deckhandbatchv1.JobWatcher{}
		if err := b.c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "scale"}, jw); err != nil {
			return false, nil
		}
		return int(jw.Status.MatchedJobs) >= n, nil
	})
	if err != nil {
		b.t.Fatalf("the JobWatcher in %s does not count %d Jobs after 30 minutes: %v", ns, n, err)
	}
}

// scaleBacklog measures (b): it stops m, makes the backlog, starts a new
// manager (returned) and times the drain; then the same backlog for
// kube-controller-manager's TTL controller, restarted.
func (b *bench) scaleBacklog(n int, m *managerProcess) *managerProcess {
	backlog := max(1, n/10)
	finished := time.Now().Add(-time.Hour)
	var drain, kcmDrain, startup, firstDelete, otherP99, otherMax, otherCount []float64
	// Where each side's drain went in CPU: on two cores the apiserver,
	// etcd, both controllers and the bench share, the wall time is bound by
	// their sum once the cores are busy.
	var cpuOf [2]map[string][]float64
	var busy [2][]float64
	drained := func(side int, mark cpuMark, procs map[string]int, requestsBefore metrics) {
		use := b.cpuSince(mark, procs)
		if cpuOf[side] == nil {
			cpuOf[side] = map[string][]float64{}
		}
		for name, secs := range use.secs {
			cpuOf[side][name] = append(cpuOf[side][name], secs)
		}
		busy[side] = append(busy[side], use.busyCores)
		fmt.Printf("bench: scale-jobwatcher N=%d backlog, %s side: CPU core-seconds %s; apiserver requests per backlog Job: %s\n",
			n, []string{"manager", "kube-controller-manager"}[side], use, requestsPerObject(requestsBefore, b.apiserverMetrics(), backlog))
	}
	for round := range b.s.repeat {
		deckhandSide := func() {
			backlogNS, otherNS := b.namespace("scale-backlog", nil), b.namespace("scale-other", nil)
			b.jobWatcher(backlogNS, scaleBacklogTTL)
			b.jobWatcher(otherNS, scaleOtherTTL)
			label := fmt.Sprintf("backlog-%d-%d", n, round)
			tr := b.trackJobs("bench-round=" + label)
			defer close(tr.stop)
			m.p.Stop()
			b.createFinishedJobs(backlogNS, "backlog", 0, backlog, map[string]string{"bench-round": label, "bench-side": "backlog"}, finished, nil)
			// The other watcher's Jobs keep falling due while the backlog
			// drains.
			stop := make(chan struct{})
			done := b.churn(stop, label, scaleChurnRate, map[string]string{"other": otherNS}, 0)
			requestsBefore := b.apiserverMetrics()
			// The CPU from the process's start, as the time: the harness's
			// install of the webhook configurations before it is not the
			// drain's (a restarted manager does not need it).
			var mark cpuMark
			b.c.BeforeManagerStart = func() { mark = b.markCPU(b.cpuProcesses(nil)) }
			m = b.startManager()
			b.c.BeforeManagerStart = nil
			ready := time.Now()
			// From the process's start: installing the webhook
			// configurations before it (0.4-0.6 s) is the harness's.
			start := m.p.Started()
			err := wait.PollUntilContextTimeout(b.ctx, 50*time.Millisecond, scaleDrainDeadline, true, func(context.Context) (bool, error) {
				tr.mu.Lock()
				defer tr.mu.Unlock()
				gone := 0
				for uid := range tr.deleted {
					if tr.side[uid] == "backlog" {
						gone++
					}
				}
				return gone >= backlog, nil
			})
			end := tr.lastDeleted("backlog")
			if err == nil {
				drained(0, mark, b.cpuProcesses(m), requestsBefore)
			}
			close(stop)
			b.must(<-done)
			time.Sleep(time.Second) // the informer's view of the last creations
			if err != nil {
				b.t.Fatalf("scale-jobwatcher backlog of %d not deleted after %s", backlog, scaleDrainDeadline)
			}
			drain = append(drain, end.Sub(start).Seconds())
			startup = append(startup, ready.Sub(start).Seconds())
			// Where the time went: until the first deletion (the process's
			// start, its caches' lists), then the deletions themselves.
			tr.mu.Lock()
			first := end
			for uid, at := range tr.deleted {
				if tr.side[uid] == "backlog" && at.Before(first) {
					first = at
				}
			}
			tr.mu.Unlock()
			firstDelete = append(firstDelete, first.Sub(start).Seconds())
			// Where the start went: the manager's log, to the microsecond.
			b.must(keepBenchFile(label+".log", []byte(m.p.Logs())))
			tr.mu.Lock()
			created := len(tr.side)
			tr.mu.Unlock()
			b.waitDeleted(tr, created, 10*time.Minute, "scale-jobwatcher other watcher")
			// The other watcher's Jobs due while the backlog drained, once
			// the manager was ready (before, nothing could delete them).
			tr.mu.Lock()
			var inWindow []float64
			for uid, at := range tr.deleted {
				fin, ok := tr.finished[uid]
				if due := fin.Add(scaleOtherTTL * time.Second); ok && tr.side[uid] == "other" && !due.Before(ready) && due.Before(end) {
					inWindow = append(inWindow, at.Sub(due).Seconds())
				}
			}
			tr.mu.Unlock()
			if len(inWindow) == 0 {
				// The drain ended before any came due: the lag of those
				// due after it is all there is to tell.
				inWindow = tr.lags(scaleOtherTTL*time.Second, ready)["other"]
			}
			otherP99 = append(otherP99, percentile(inWindow, 99))
			otherMax = append(otherMax, slices.Max(append(inWindow, 0)))
			otherCount = append(otherCount, float64(len(inWindow)))
			b.dropNamespace(backlogNS)
			b.dropNamespace(otherNS)
		}
		kcmSide := func() {
			ttlNS := b.namespace("scale-backlog-ttl", nil)
			label := fmt.Sprintf("backlog-ttl-%d-%d", n, round)
			tr := b.trackJobs("bench-round=" + label)
			defer close(tr.stop)
			b.must(b.c.KillComponent("kube-controller-manager"))
			b.createFinishedJobs(ttlNS, "backlog", 0, backlog, map[string]string{"bench-round": label, "bench-side": "ttl"}, finished, ptr.To[int32](scaleBacklogTTL))
			// The same churn as the manager drains under, due to the
			// TTL controller (its lag is not measured: it is load).
			otherNS := b.namespace("scale-other-ttl", nil)
			stop := make(chan struct{})
			done := b.churn(stop, label+"-other", scaleChurnRate, map[string]string{"ttl": otherNS}, scaleOtherTTL)
			requestsBefore := b.apiserverMetrics()
			mark := b.markCPU(b.cpuProcesses(m))
			start := time.Now()
			b.must(b.c.StartComponents())
			end := b.waitDeleted(tr, backlog, scaleDrainDeadline, "kube-controller-manager's backlog")
			drained(1, mark, b.cpuProcesses(m), requestsBefore)
			close(stop)
			b.must(<-done)
			kcmDrain = append(kcmDrain, end.Sub(start).Seconds())
			b.dropNamespace(ttlNS)
			b.dropNamespace(otherNS)
		}
		if round%2 == 0 {
			deckhandSide()
			kcmSide()
		} else {
			kcmSide()
			deckhandSide()
		}
	}
	row := fmt.Sprintf("scale: backlog of N/10 Jobs past their TTL at start, manager vs kube-controller-manager restarted; another watcher's Jobs due meanwhile (%d/s, TTL %ds)", scaleChurnRate, scaleOtherTTL)
	f := b.rep.add(&figure{Row: row, Metric: "backlog of N/10 deleted, from process start", Unit: "s", N: n}, drain, kcmDrain)
	f.judgeRatio("≤ 0.5×", 0.5)
	b.rep.add(&figure{Row: row, Metric: "of which the manager's start, until its /metrics answers", Unit: "s", N: n}, startup, nil)
	b.rep.add(&figure{Row: row, Metric: "of which until the first deletion", Unit: "s", N: n}, firstDelete, nil)
	f = b.rep.add(&figure{Row: row, Metric: "other watcher's deletion lag after TTL during the drain, p99", Unit: "s", N: n}, otherP99, nil)
	f.judge("≤ 1 s", f.Deckhand <= 1)
	b.rep.add(&figure{Row: row, Metric: "other watcher's deletion lag after TTL during the drain, max", Unit: "s", N: n}, otherMax, nil)
	b.rep.add(&figure{Row: row, Metric: "other watcher's Jobs due during the drain", Unit: "Jobs", N: n}, otherCount, nil)
	for _, p := range []struct{ metric, manager, kcm string }{
		{"CPU during the drain: kube-apiserver", "kube-apiserver", "kube-apiserver"},
		{"CPU during the drain: etcd", "etcd", "etcd"},
		{"CPU during the drain: the controller (manager; kube-controller-manager)", "manager", "kube-controller-manager"},
		{"CPU during the drain: the bench (its informers and churn)", "bench", "bench"},
	} {
		b.rep.add(&figure{Row: row, Metric: p.metric, Unit: "core-s", N: n}, cpuOf[0][p.manager], cpuOf[1][p.kcm])
	}
	b.rep.add(&figure{Row: row, Metric: "the machine's cores busy during the drain, on average", Unit: "cores", N: n}, busy[0], busy[1])
	return m
}
