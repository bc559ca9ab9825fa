package jobwatcher

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/internal/eventnote"
	"github.com/deckhand-dev/deckhand/internal/status"
)

// +kubebuilder:rbac:groups=batch.deckhand.dev,resources=jobwatchers/status;clusterjobwatchers/status,verbs=get;patch

// StatusInterval is the least time between two evaluations of one
// watcher's Jobs. The Job events in between are coalesced into one
// evaluation: a burst of events (a thousand Jobs finishing, a ClusterJobWatcher
// over a busy cluster) costs one list and judgment of the watcher's Jobs per
// interval, not one per event.
const StatusInterval = time.Second

// StatusReconciler keeps the status of one watcher kind. It reads only the
// cache; it writes when the status changed, and comes back when the next Job
// the watcher governs expires.
type StatusReconciler struct {
	client.Client
	// Jobs reads a namespace's Jobs one at a time (scopedcache.Each): the
	// manager's cache. Without it, Client lists them.
	Jobs     client.Reader
	Recorder events.EventRecorder
	Now      func() time.Time

	// cluster is true for ClusterJobWatchers.
	cluster bool
	status  *status.Writer[deckhandbatchv1.JobWatcherStatus]
	// deleted counts the deletions of this kind's watchers.
	deleted *ledger
	// watchers memoizes this kind's watchers for watchersOf (those of a
	// namespace; every ClusterJobWatcher under ""), between their events.
	watchers *watcherMemo
	// protection is the namespaces ClusterJobWatchers leave alone.
	protection *protection
	// specs holds the watchers' compiled specs, shared with the Job
	// controller.
	specs *CompiledSpecs

	mu sync.Mutex
	// evaluated is when each watcher's Jobs were last evaluated.
	evaluated map[types.NamespacedName]time.Time
}

// NewStatusReconciler returns the status reconciler of JobWatchers, or with
// cluster of ClusterJobWatchers, which keep out of the protected namespaces
// (nil: the defaults) and those c shows labelled
// deckhand.dev/protected=true, and compiles watchers through specs (shared
// with the Job controller).
func NewStatusReconciler(c client.Client, jobs client.Reader, rec events.EventRecorder, cluster bool, protected []string, specs *CompiledSpecs) *StatusReconciler {
	r := &StatusReconciler{Client: c, Jobs: jobs, Recorder: rec, Now: time.Now, cluster: cluster, deleted: newLedger(),
		protection: newProtection(protected, c), specs: specs,
		evaluated: map[types.NamespacedName]time.Time{}}
	r.watchers = newWatcherMemo(func(ctx context.Context, ns string) ([]*compiledWatcher, error) {
		if cluster {
			return listClusterJobWatchers(ctx, r.Client, r.protection, r.specs)
		}
		return listJobWatchers(ctx, r.Client, ns, r.specs)
	})
	r.status = status.NewWriter(c, status.ConditionMetrics(r.kind(), func(s *deckhandbatchv1.JobWatcherStatus) []metav1.Condition { return s.Conditions }))
	return r
}

// Reconcile recounts what one watcher matches and governs and writes its
// status.
func (r *StatusReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	w, err := r.get(ctx, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	if w == nil {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	start := r.Now()
	if wait := r.untilDue(req.NamespacedName, start); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	// A JobWatcher's Jobs, and the JobWatchers that compete for them, are in
	// its namespace; a ClusterJobWatcher's (no namespace) anywhere.
	watchers, err := listWatchers(ctx, r.Client, req.Namespace, r.protection, r.specs)
	if err != nil {
		return ctrl.Result{}, err
	}
	s, err := summarizeFrom(w.compiled, watchers, jobsIn(ctx, r.Jobs, r.Client, req.Namespace), start)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the Jobs of namespace %s: %w", req.Namespace, err)
	}
	s.Breaker = r.deleted.breakerState(w.obj, w.compiled.maxDeletionsPerMinute(), start)
	expiredJobs.WithLabelValues(r.kind(), req.Namespace, req.Name).Set(float64(s.Expired))
	deleted := r.deleted.count(w.obj, w.status.RecentFailures)
	want := computeStatus(*w.status, w.compiled, s, deleted, start, r.Now())
	if _, err := r.status.Write(ctx, w.obj, w.status, want); err != nil {
		return ctrl.Result{}, fmt.Errorf("writing status of %s: %w", w.compiled.key(), err)
	}
	r.deleted.saved(deleted.failures)
	r.tellDeleted(w.obj, r.deleted.tell(w.obj.GetUID()))
	if s.Breaker.untold {
		r.Recorder.Eventf(w.obj, nil, corev1.EventTypeWarning, EventTooManyDeletions, "Pause", "%s", s.Breaker.message)
	}
	if s.Next != nil {
		return ctrl.Result{RequeueAfter: s.Next.Sub(start)}, nil
	}
	return ctrl.Result{}, nil
}

// tellDeleted records one Event on the watcher for the Jobs it deleted since
// the last: the deletion itself when there is one, else how many and the
// first few names.
func (r *StatusReconciler) tellDeleted(watcher client.Object, jobs []deletedJob) {
	switch len(jobs) {
	case 0:
	case 1:
		r.Recorder.Eventf(watcher, jobs[0].job(), corev1.EventTypeNormal, EventDeleted, "Delete", "%s", jobs[0].note)
	default:
		// The first Job named is the related object: two rounds are two
		// Events, not one series showing the first round's note.
		r.Recorder.Eventf(watcher, eventnote.First(jobs).job(), corev1.EventTypeNormal, EventDeleted, "Delete", "deleted %d finished Jobs: %s", len(jobs), eventnote.Names(jobs))
	}
}

// untilDue is how long the watcher key must wait for its next evaluation,
// zero when it may run now, which it records.
func (r *StatusReconciler) untilDue(key types.NamespacedName, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if last, ok := r.evaluated[key]; ok && now.Sub(last) < StatusInterval && !now.Before(last) {
		return StatusInterval - now.Sub(last)
	}
	r.evaluated[key] = now
	return 0
}

// watcher is a watcher of either kind as read, compiled.
type watcher struct {
	obj      client.Object
	status   *deckhandbatchv1.JobWatcherStatus
	compiled *compiledWatcher
}

// get reads the watcher from the cache; nil when it is gone.
func (r *StatusReconciler) get(ctx context.Context, key client.ObjectKey) (*watcher, error) {
	obj := r.newWatcher()
	if err := r.Get(ctx, key, obj); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	w := &watcher{obj: obj, compiled: r.specs.watcherOf(obj, r.protection)}
	switch o := obj.(type) {
	case *deckhandbatchv1.JobWatcher:
		w.status = &o.Status
	case *deckhandbatchv1.ClusterJobWatcher:
		w.status = &o.Status
	}
	return w, nil
}

// forget drops what is kept in memory and in metrics for a watcher that is
// gone.
func (r *StatusReconciler) forget(key types.NamespacedName) {
	r.status.Forget(key)
	r.deleted.forget(key)
	r.specs.forget(r.cluster, key)
	r.mu.Lock()
	delete(r.evaluated, key)
	r.mu.Unlock()
	forgetMetrics(r.kind(), key)
}

func (r *StatusReconciler) kind() string {
	if r.cluster {
		return "ClusterJobWatcher"
	}
	return "JobWatcher"
}

func (r *StatusReconciler) name() string {
	if r.cluster {
		return "clusterjobwatcher-status"
	}
	return "jobwatcher-status"
}

func (r *StatusReconciler) newWatcher() client.Object {
	if r.cluster {
		return &deckhandbatchv1.ClusterJobWatcher{}
	}
	return &deckhandbatchv1.JobWatcher{}
}

// watcherEvents tells the memo of watchers of every event of a watcher;
// it queues nothing (the watch of the kind itself does).
func (r *StatusReconciler) watcherEvents() handler.EventHandler {
	return watcherEvents{memo: r.watchers}
}

// watchersOf maps a Job event to the watchers of this kind that reach the
// Job's namespace (and to the invalid ones, whose status says why they are
// idle). It reads the memo of watchers (watcherMemo), not the cache: a start
// over N Jobs listed the watchers N times.
func (r *StatusReconciler) watchersOf(ctx context.Context, job client.Object) []reconcile.Request {
	ns, memoKey := job.GetNamespace(), job.GetNamespace()
	if r.cluster {
		memoKey = ""
	}
	watchers, err := r.watchers.get(ctx, memoKey)
	if err != nil {
		logf.FromContext(ctx).Error(err, "listing watchers for Job", "kind", r.kind(), "job", klog.KObj(job))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(watchers))
	for _, p := range watchers {
		if !r.cluster || p.err != nil || p.reaches(ns) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p.watcher)})
		}
	}
	return reqs
}
