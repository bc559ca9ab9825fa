package jobwatcher_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	jobwatchercontroller "github.com/deckhand-dev/deckhand/internal/controller/jobwatcher"
	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/faultinject"
)

// A backlog of one watcher's due Jobs (a manager started over history)
// costs a DELETE per Job and a GET of the watcher per round of workers, not
// three requests per Job: the DELETE's preconditions (the cached Job's UID
// and resourceVersion) are the check past the cache that a GET of the Job
// was, and the Jobs judged while a read of their watcher is under way share
// the next one. It logs the drain rate (DECKHAND_TEST_DRAIN_JOBS sets the
// backlog; the machine is shared: an indication, not a figure).
func TestBacklogCostsADeletePerJobAndFewWatcherReads(t *testing.T) {
	if testing.Short() {
		t.Skip("creates hundreds of Jobs")
	}
	g := testenv.NewG(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	backlog := 300
	if n, err := strconv.Atoi(os.Getenv("DECKHAND_TEST_DRAIN_JOBS")); err == nil {
		backlog = n
	}
	_, stop := env.StartManager(t, env.ManagerOptions()) // its webhook admits the watcher
	w := jobWatcher(ns, "w", i32(60), nil)
	env.Create(t, w)
	stop()
	finished := time.Now().Add(-time.Hour)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range jobs {
				createJob(t, newJob(ns, fmt.Sprintf("job-%05d", i)), batchv1.JobComplete, finished)
			}
		})
	}
	for i := range backlog {
		jobs <- i
	}
	close(jobs)
	wg.Wait()

	jobsBefore, watchersBefore := apiserverJobRequests(t), apiserverRequests(t, "batch.deckhand.dev", "jobwatchers")
	oursBefore := controllerRequests(t)
	opts := env.ManagerOptions()
	opts.WatchNamespaces = []string{ns}
	started := time.Now()
	_, stop = env.StartManager(t, opts)
	defer stop()
	// Timed on the controller's own count of its DELETEs: polling the
	// namespace's Jobs would load the apiserver the drain is bound by.
	deletes := func() float64 {
		n, err := testenv.Metric("deckhand_jobwatcher_job_api_requests_total", map[string]string{"verb": "delete"})
		g.Expect(err).NotTo(HaveOccurred())
		return n
	}
	deletesBefore := deletes()
	var first time.Time
	g.Eventually(func() float64 {
		n := deletes() - deletesBefore
		if n > 0 && first.IsZero() {
			first = time.Now()
		}
		return n
	}).WithTimeout(3*time.Minute).WithPolling(5*time.Millisecond).Should(BeNumerically(">=", backlog), "DELETEs sent")
	end := time.Now()
	t.Logf("%d due Jobs deleted %s after the manager started; the first after %s, then %.0f Jobs a second",
		backlog, end.Sub(started).Round(time.Millisecond), first.Sub(started).Round(time.Millisecond),
		float64(backlog-1)/end.Sub(first).Seconds())
	g.Eventually(func() ([]batchv1.Job, error) {
		var l batchv1.JobList
		err := env.Client.List(ctx, &l, client.InNamespace(ns))
		return l.Items, err
	}).Should(BeEmpty(), "due Jobs left")

	jobsSeen := delta(apiserverJobRequests(t), jobsBefore)
	watcherGets := delta(apiserverRequests(t, "batch.deckhand.dev", "jobwatchers"), watchersBefore)["GET"]
	ours := delta(controllerRequests(t), oursBefore)
	t.Logf("the API server saw GET %v, DELETE %v of Jobs and GET %v of the watcher; the controller counted %v: %.2f requests per deleted Job",
		jobsSeen["GET"], jobsSeen["DELETE"], watcherGets, ours, (ours["jobs/get"]+ours["jobs/delete"]+ours["jobwatchers/get"])/float64(backlog))
	g.Expect(jobsSeen["DELETE"]).To(BeEquivalentTo(backlog), "DELETEs of Jobs")
	g.Expect(jobsSeen["GET"]).To(BeZero(), "GETs of Jobs past the cache")
	g.Expect(ours["jobs/get"]).To(BeZero(), "GETs of Jobs counted")
	g.Expect(ours["jobs/delete"]).To(BeEquivalentTo(backlog), "DELETEs of Jobs counted")
	g.Expect(ours["jobwatchers/get"]).To(And(BeNumerically(">", 0), BeNumerically("<=", watcherGets), BeNumerically("<=", backlog/2)),
		"GETs of the watcher for the deletions")
}

// TestDeleteActsOnlyOnTheVersionJudged: the cache shows a due Job, the API
// server holds another version by the time of the DELETE. The DELETE's
// preconditions refuse it, and the Job is read past the cache and judged
// again: kept when it changed its verdict (annotated keep), deleted when it
// changed otherwise. A Job the cache shows as the API server holds it is
// deleted without being read.
func TestDeleteActsOnlyOnTheVersionJudged(t *testing.T) {
	tests := map[string]struct {
		change      func(*batchv1.Job)
		wantDeleted bool
		// wantGets is how many times the Job is read past the cache.
		wantGets int32
	}{
		"unchanged": {nil, true, 0},
		"annotated keep past the cache": {func(j *batchv1.Job) {
			j.Annotations = map[string]string{deckhandbatchv1.KeepAnnotation: "true"}
		}, false, 1},
		"given a longer TTL past the cache": {func(j *batchv1.Job) {
			j.Annotations = map[string]string{deckhandbatchv1.TTLAnnotation: "24h"}
		}, false, 1},
		"labelled past the cache": {func(j *batchv1.Job) {
			if j.Labels == nil {
				j.Labels = map[string]string{}
			}
			j.Labels["team"] = "a"
		}, true, 1},
	}
	ns := env.Namespace(t)
	_, stop := env.StartManager(t, env.ManagerOptions()) // its webhook admits the watcher
	env.Create(t, jobWatcher(ns, "w", i32(0), nil))
	stop()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := testenv.NewG(t)
			ctx := context.Background()
			job := createJob(t, newJob(ns, fmt.Sprintf("job-%d", time.Now().UnixNano())), batchv1.JobComplete, time.Now().Add(-time.Minute))
			cached := job.DeepCopy()
			if tc.change != nil {
				g.Expect(env.Update(job, func() { tc.change(job) })).To(Succeed())
			}
			reads := &jobGets{Client: env.Client}
			r := jobwatchercontroller.NewTestJobReconciler(faultinject.StaleGets(env.Client, cached), reads, nil, events.NewFakeRecorder(10))
			_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(job)})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(env.Exists(job)()).To(Equal(!tc.wantDeleted), "deleted")
			g.Expect(reads.n.Load()).To(Equal(tc.wantGets), "reads of the Job past the cache")
		})
	}
}

// jobGets counts the Jobs read through it.
type jobGets struct {
	client.Client
	n atomic.Int32
}

func (c *jobGets) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*batchv1.Job); ok {
		c.n.Add(1)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// watcherGets passes reads on to the API server and calls before(n) ahead
// of the n-th read of a watcher (from 1), after(n) once it is answered.
type watcherGets struct {
	client.Client
	n             atomic.Int32
	before, after func(n int32)
}

func (c *watcherGets) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*deckhandbatchv1.JobWatcher); !ok {
		return c.Client.Get(ctx, key, obj, opts...)
	}
	n := c.n.Add(1)
	if c.before != nil {
		c.before(n)
	}
	err := c.Client.Get(ctx, key, obj, opts...)
	if c.after != nil {
		c.after(n)
	}
	return err
}

// The governing watcher changes after the Job was judged on the cache but
// before the DELETE: suspended, deleted, given a longer TTL. The read of the
// watcher past the cache that the deletion rests on sees it, and the Job
// stays.
func TestWatcherChangedAfterTheJobWasJudgedDeletesNothing(t *testing.T) {
	tests := map[string]func(g *WithT, w *deckhandbatchv1.JobWatcher){
		"suspended": func(g *WithT, w *deckhandbatchv1.JobWatcher) {
			g.Expect(env.Update(w, func() { w.Spec.Suspend = true })).To(Succeed())
		},
		"deleted": func(g *WithT, w *deckhandbatchv1.JobWatcher) {
			g.Expect(env.Client.Delete(context.Background(), w)).To(Succeed())
		},
		"given a longer TTL": func(g *WithT, w *deckhandbatchv1.JobWatcher) {
			g.Expect(env.Update(w, func() { w.Spec.TTLSecondsAfterSucceeded = i32(86400) })).To(Succeed())
		},
	}
	for name, change := range tests {
		t.Run(name, func(t *testing.T) {
			g := testenv.NewG(t)
			ctx := context.Background()
			ns := env.Namespace(t)
			w := jobWatcher(ns, "w", i32(0), nil)
			createUnvalidated(t, g, w)
			job := createJob(t, newJob(ns, "etl"), batchv1.JobComplete, time.Now().Add(-time.Minute))
			// The cache (here the API server itself) shows the watcher as it
			// was when the Job was judged; it changes just before it is read
			// for the deletion.
			reads := &watcherGets{Client: env.Client, before: func(n int32) {
				if n == 1 {
					change(g, w.DeepCopy())
				}
			}}
			r := jobwatchercontroller.NewTestJobReconciler(env.Client, reads, nil, events.NewFakeRecorder(10))
			res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(job)})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(reads.n.Load()).To(BeEquivalentTo(1), "reads of the watcher past the cache")
			g.Expect(env.Exists(job)()).To(BeTrue(), "deleted on the say of a watcher that changed")
			g.Expect(res.RequeueAfter).To(BeNumerically(">", 0), "judged again later")
		})
	}
}

// Reads of a watcher are shared, but never one that started before the Job
// was judged: Job a's read of the watcher is under way (answered: not
// suspended) when the watcher is suspended and Job b is judged on a cache
// that does not show it yet. b's deletion must rest on a read that started
// after its judgement, which sees the suspension; sharing a's would delete
// b on the say of a watcher suspended before b was judged.
func TestAJobJudgedDuringAWatcherReadWaitsForTheNext(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	w := jobWatcher(ns, "w", i32(0), nil)
	createUnvalidated(t, g, w)
	finished := time.Now().Add(-time.Minute)
	a := createJob(t, newJob(ns, "a"), batchv1.JobComplete, finished)
	b := createJob(t, newJob(ns, "b"), batchv1.JobComplete, finished)
	var stale deckhandbatchv1.JobWatcherList
	g.Expect(env.Client.List(ctx, &stale, client.InNamespace(ns))).To(Succeed())

	answered, release := make(chan struct{}), make(chan struct{})
	reads := &watcherGets{Client: env.Client, after: func(n int32) {
		if n == 1 {
			close(answered)
			<-release // a slow answer: a's read is under way
		}
	}}
	r := jobwatchercontroller.NewTestJobReconciler(faultinject.StaleLists(env.Client, &stale), reads, nil, events.NewFakeRecorder(10))
	reconcile := func(job *batchv1.Job) <-chan error {
		errc := make(chan error, 1)
		go func() {
			_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(job)})
			errc <- err
		}()
		return errc
	}
	aDone := reconcile(a)
	<-answered
	g.Expect(env.Update(w, func() { w.Spec.Suspend = true })).To(Succeed())
	bDone := reconcile(b) // judged due on the stale cache, after the suspension
	time.Sleep(500 * time.Millisecond)
	close(release)
	g.Expect(<-aDone).To(Succeed())
	g.Expect(<-bDone).To(Succeed())

	g.Expect(env.Exists(a)()).To(BeFalse(), "a, judged before the suspension on a read that began after")
	g.Expect(env.Exists(b)()).To(BeTrue(), "b was deleted on a read of its watcher that began before it was judged")
	g.Expect(reads.n.Load()).To(BeEquivalentTo(2), "reads of the watcher")
}

// delta is a - b, key by key.
func delta(a, b map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range a {
		out[k] = v - b[k]
	}
	return out
}

// controllerRequests reads deckhand_jobwatcher_job_api_requests_total as
// resource/verb from this process's registry.
func controllerRequests(t *testing.T) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, rv := range [][2]string{{"jobs", "get"}, {"jobs", "delete"}, {"jobwatchers", "get"}} {
		v, err := testenv.Metric("deckhand_jobwatcher_job_api_requests_total", map[string]string{"resource": rv[0], "verb": rv[1]})
		if err != nil {
			t.Fatal(err)
		}
		out[rv[0]+"/"+rv[1]] = v
	}
	return out
}

// createUnvalidated creates w with the watchers' webhook out of the
// apiserver (no manager runs to serve it), so that the test can change w
// later without one.
func createUnvalidated(t *testing.T, g *WithT, w client.Object) {
	t.Helper()
	env.WithoutValidation(t, "vjobwatcher-v1.batch.deckhand.dev")
	g.Eventually(func() error { return env.Client.Create(context.Background(), w) }).Should(Succeed())
}
