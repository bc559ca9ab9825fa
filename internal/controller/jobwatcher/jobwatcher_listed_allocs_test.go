package jobwatcher

import (
	"context"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// recordingQueue is a priority queue that only records the last Job added
// and how: no allocation of its own.
type recordingQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	req  reconcile.Request
	opts priorityqueue.AddOpts
	adds int
}

func (q *recordingQueue) AddWithOpts(o priorityqueue.AddOpts, reqs ...reconcile.Request) {
	q.opts, q.req = o, reqs[0]
	q.adds++
}

// A Job of the initial list costs the handler what deciding it costs, and
// no more: the handler built a jobEnqueuer (with two maps, and an entry in
// each) for every listed Job, 10,000 of each at a start over 10,000 Jobs.
// Each Job is still queued as the decision says: for its expiry at normal
// priority when the memoized watchers tell it, at low priority when no
// watcher does.
func TestAListedJobAllocatesOnlyItsDecision(t *testing.T) {
	now := finishedAt.Add(10 * time.Second)
	for name, tt := range map[string]struct {
		watchers []*compiledWatcher
		after    time.Duration
		priority int
	}{
		"a watcher tells its expiry": {watchers: []*compiledWatcher{jw("listed", "hour", ptr.To[int32](3600), nil)},
			after: time.Hour - 10*time.Second, priority: normalPriority},
		"no watcher: judged later": {priority: handler.LowPriority},
	} {
		t.Run(name, func(t *testing.T) {
			r := &JobReconciler{Now: func() time.Time { return now }, histories: newHistoryMemo()}
			r.watchers = newWatcherMemo(func(context.Context, string) ([]*compiledWatcher, error) { return tt.watchers, nil })
			job := testJob("listed", "nightly-1", succeeded)
			ctx := context.Background()
			q := &recordingQueue{}
			events := r.jobEvents()
			listed := event.CreateEvent{Object: job, IsInInitialList: true}
			events.Create(ctx, listed, q) // the memo holds the namespace's watchers from here on

			perJob := testing.AllocsPerRun(100, func() { events.Create(ctx, listed, q) })
			if q.adds != 102 || q.req.Name != "nightly-1" || q.opts.After != tt.after || ptr.Deref(q.opts.Priority, 0) != tt.priority {
				t.Errorf("queued %d times, %v after %s at priority %v; want 102, after %s at %d",
					q.adds, q.req, q.opts.After, ptr.Deref(q.opts.Priority, 0), tt.after, tt.priority)
			}
			// The same event through a handler that only decides: what
			// controller-runtime's handler and the queue's Add cost, plus
			// the decision.
			decides := handler.Funcs{CreateFunc: func(_ context.Context, e event.CreateEvent, q requestQueue) {
				r.histories.changed(e.Object.GetNamespace())
				var opts priorityqueue.AddOpts
				if tt.watchers == nil {
					opts = queueListed(time.Time{}, false, now)
				} else {
					d := decide(job, tt.watchers, nil)
					opts = queueListed(d.Expiry, d.Verdict == verdictExpires, now)
				}
				q.(priorityqueue.PriorityQueue[reconcile.Request]).AddWithOpts(opts, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.Object)})
			}}
			decision := testing.AllocsPerRun(100, func() { decides.Create(ctx, listed, q) })
			t.Logf("allocations per listed Job: handler %.0f, its decision %.0f", perJob, decision)
			if perJob > decision {
				t.Errorf("the handler allocates %.0f times for a listed Job, its decision %.0f", perJob, decision)
			}
		})
	}
}
