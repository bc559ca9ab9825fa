package jobwatcher

import (
	"fmt"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

// The scoped cache hands a namespace from one informer to another (a
// switch across its cluster-wide threshold) by telling each handler the
// Jobs it was never told as the initial list they are
// (internal/scopedcache, TestAHandoverTellsWhatWasNeverToldAsTheInitialList).
// The Job handler computes no history for such an Add: each Job is judged,
// its history included, by Reconcile, where the history is memoized. A
// handover of N Jobs told as N non-initial Adds computed the namespace's
// history N times over N Jobs under the cache's delivery lock (every Job
// delivery of the cluster waited).
func TestAHandoverOfJobsComputesNoHistoryPerJob(t *testing.T) {
	const n = 1000
	r, c, jobs := reconcilerOverFinishedJobs(t, n)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()

	h := r.jobEvents()
	start := time.Now()
	for _, job := range jobs {
		h.Create(t.Context(), event.CreateEvent{Object: job, IsInInitialList: true}, q)
	}
	t.Logf("a handover of %d Jobs: %v in the handler, the history computed %d times", n, time.Since(start).Round(time.Millisecond), c.N.Load())
	if got := c.N.Load(); got > 1 {
		t.Fatalf("a handover of %d Jobs of one namespace computed its history %d times in the handler, want at most once", n, got)
	}
	if q.Len() != n {
		t.Fatalf("a handover of %d Jobs queued %d", n, q.Len())
	}
}

// A burst of Job events after the start (a relist, a fleet of CronJobs
// firing together, Jobs finishing at once) under a watcher with a history
// limit computes the namespace's history once, not once per event: the
// handler queues one pass over the namespace (historyPass), which the
// workqueue coalesces, and the pass queues the Jobs pushed beyond the
// limit. Computed in the handler, a burst of N events over N Jobs was N²
// work in the cache's delivery path, while every Job delivery waited.
func TestABurstOfJobEventsComputesTheHistoryOnce(t *testing.T) {
	const n = 1000
	r, c, jobs := reconcilerOverFinishedJobs(t, n)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()

	h := r.jobEvents()
	start := time.Now()
	for _, job := range jobs {
		h.Create(t.Context(), event.CreateEvent{Object: job}, q)
	}
	t.Logf("a burst of %d Job events: %v in the handler, the history computed %d times", n, time.Since(start).Round(time.Millisecond), c.N.Load())
	if got := c.N.Load(); got > 0 {
		t.Fatalf("a burst of %d Job events of one namespace computed its history %d times in the handler, want none", n, got)
	}
	if q.Len() != n+1 {
		t.Fatalf("a burst of %d Job events queued %d requests, want each Job and one pass", n, q.Len())
	}

	// The workers drain the queue: the pass computes the history once and
	// queues the Jobs beyond the limit (already queued here, as they were
	// created; the queue holds each once).
	passes := 0
	for q.Len() > 0 {
		req, _ := q.Get()
		if isHistoryPass(req) {
			passes++
			if _, err := r.Reconcile(t.Context(), req); err != nil {
				t.Fatal(err)
			}
		}
		q.Done(req)
		q.Forget(req)
	}
	if passes != 1 || c.N.Load() != 1 {
		t.Fatalf("the burst ran %d passes computing the history %d times, want 1 and 1", passes, c.N.Load())
	}
}

// A pass queues the Jobs its namespace's newest Jobs pushed beyond a history
// limit, and only those.
func TestAHistoryPassQueuesTheJobsBeyondTheLimit(t *testing.T) {
	const n, limit = 30, keptByTheWatcher
	r, _, jobs := reconcilerOverFinishedJobs(t, n)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	h := r.jobEvents()
	h.Create(t.Context(), event.CreateEvent{Object: jobs[n-1]}, q)
	for q.Len() > 0 {
		req, _ := q.Get()
		q.Done(req)
		q.Forget(req)
		if isHistoryPass(req) {
			if _, err := r.Reconcile(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	var queued []string
	for q.Len() > 0 {
		req, _ := q.Get()
		queued = append(queued, req.Name)
		q.Done(req)
	}
	slices.Sort(queued)
	want := make([]string, 0, n-limit)
	for _, job := range jobs[:n-limit] {
		want = append(want, job.Name)
	}
	if !slices.Equal(queued, want) {
		t.Fatalf("the pass queued %v, want the %d oldest %v", queued, n-limit, want)
	}
}

// keptByTheWatcher is the history limit of reconcilerOverFinishedJobs's
// watcher.
const keptByTheWatcher = 10

// reconcilerOverFinishedJobs returns a JobReconciler over a namespace "ns"
// with a JobWatcher keeping the keptByTheWatcher newest succeeded Jobs, and n Jobs that
// succeeded a second apart, oldest first; c counts the lists of Jobs, each
// one computation of the namespace's history.
func reconcilerOverFinishedJobs(t *testing.T, n int) (r *JobReconciler, c *JobLists, jobs []*batchv1.Job) {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = deckhandbatchv1.AddToScheme(scheme)
	w := &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", UID: "w-1", Generation: 1}}
	w.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](keptByTheWatcher)
	objs := make([]client.Object, 0, 1+n)
	objs = append(objs, w)
	jobs = make([]*batchv1.Job, 0, n)
	at := time.Now().Add(-time.Hour)
	for i := range n {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("job-%04d", i)}}
		job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(at.Add(time.Duration(i) * time.Second))}}
		jobs = append(jobs, job)
		objs = append(objs, job)
	}
	c = &JobLists{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()}
	return NewTestJobReconciler(c, c, nil, events.NewFakeRecorder(10)), c, jobs
}
