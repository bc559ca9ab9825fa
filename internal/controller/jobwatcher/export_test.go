package jobwatcher

import (
	"context"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

// RecordDeletion credits one deletion to watcher in r's ledger, as the Job
// controller does after deleting a Job.
func RecordDeletion(ctx context.Context, r *StatusReconciler, watcher client.Object) {
	r.deleted.add(ctx, watcher, deletedJob{name: "ns/job", note: "deleted Succeeded Job ns/job (TTL 1s)"})
	<-r.deleted.notify
}

// Tallies is how many watchers r's ledger keeps counts for.
func Tallies(r *StatusReconciler) int {
	r.deleted.mu.Lock()
	defer r.deleted.mu.Unlock()
	return len(r.deleted.tallies)
}

// Evaluations is how many watchers r keeps an evaluation time for.
func Evaluations(r *StatusReconciler) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.evaluated)
}

// NewTestJobReconciler is a JobReconciler with ledgers of its own, reading
// through c (the cache) and apiReader (past it).
func NewTestJobReconciler(c client.Client, apiReader, jobs client.Reader, rec events.EventRecorder) *JobReconciler {
	return NewJobReconciler(c, apiReader, jobs, rec, nil, NewStatusReconciler(c, nil, rec, false, nil, nil),
		NewStatusReconciler(c, nil, rec, true, nil, nil), nil, nil)
}

// compileJobWatcher compiles w without a CompiledSpecs (every time).
func compileJobWatcher(w *deckhandbatchv1.JobWatcher) *compiledWatcher {
	return (*CompiledSpecs)(nil).jobWatcher(w)
}

// compileClusterJobWatcher compiles w under prot without a CompiledSpecs.
func compileClusterJobWatcher(w *deckhandbatchv1.ClusterJobWatcher, prot *protection) *compiledWatcher {
	return (*CompiledSpecs)(nil).clusterJobWatcher(w, prot)
}

// TellDeleted records r's Event for a round of deletions of the named Jobs
// (namespace/name).
func TellDeleted(r *StatusReconciler, watcher client.Object, jobs ...string) {
	round := make([]deletedJob, len(jobs))
	for i, j := range jobs {
		round[i] = deletedJob{name: j, note: "deleted Succeeded Job " + j + " (TTL 1s)"}
	}
	r.tellDeleted(watcher, round)
}

// JobsReached is what an event of watcher queues: the finished Jobs in its
// reach.
func JobsReached(ctx context.Context, r *JobReconciler, watcher client.Object) []reconcile.Request {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	r.watcherJobs().Create(ctx, event.CreateEvent{Object: watcher}, q)
	var out []reconcile.Request
	for q.Len() > 0 {
		req, _ := q.Get()
		out = append(out, req)
		q.Done(req)
	}
	return out
}

// JobEvents is the handler of r's controller for Job events.
func JobEvents(r *JobReconciler) handler.EventHandler { return r.jobEvents() }

// WatcherEvents is the handler of r's controller for watcher events.
func WatcherEvents(r *JobReconciler) handler.EventHandler { return r.watcherEvents() }

// StatusWatcherEvents is the handler of r's controller that tells its memo
// of watchers of their events.
func StatusWatcherEvents(r *StatusReconciler) handler.EventHandler { return r.watcherEvents() }

// WatchersOf is what r's controller queues for an event of job.
func WatchersOf(ctx context.Context, r *StatusReconciler, job client.Object) []reconcile.Request {
	return r.watchersOf(ctx, job)
}

// ReconcileSettled reconciles req with r until it no longer waits for a list
// of its namespace past the cache (a Job beyond a history limit joins one
// and is judged again once it has ended).
func ReconcileSettled(ctx context.Context, r *JobReconciler, req reconcile.Request) (reconcile.Result, error) {
	for {
		res, err := r.Reconcile(ctx, req)
		if err != nil || res.RequeueAfter != historyRecheck {
			return res, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// JobLists counts the Lists of Jobs read through it: each is one
// computation of a namespace's history.
type JobLists struct {
	client.Client
	N atomic.Int64
}

func (c *JobLists) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*batchv1.JobList); ok {
		c.N.Add(1)
	}
	return c.Client.List(ctx, list, opts...)
}
