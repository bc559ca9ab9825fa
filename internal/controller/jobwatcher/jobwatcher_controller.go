// Package jobwatcher runs JobWatchers and ClusterJobWatchers: it deletes finished
// Jobs when the policy that governs each one says so, and keeps the watchers'
// status.
package jobwatcher

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/internal/setupoptions"
)

// ControllerName names the controller that deletes Jobs in --controllers,
// logs, metrics and Events. It runs JobWatchers and ClusterJobWatchers
// together because precedence needs both: with ClusterJobWatchers alone, a
// namespace's own JobWatchers would be ignored and Jobs could go sooner than
// they allow.
const ControllerName = "jobwatcher"

// Event reasons, on the Job and on the watcher that governs it.
const (
	// EventDeleted: the watcher deleted the Job.
	EventDeleted = "Deleted"
	// EventWouldDelete: in dry run, the watcher would have deleted the Job.
	EventWouldDelete = "WouldDelete"
	// EventDeleteFailed: deleting a due Job failed (on the watcher).
	EventDeleteFailed = "DeleteFailed"
	// EventTooManyDeletions: the watcher's deletion circuit breaker tripped
	// (on the watcher): how many Jobs it held, and a few of their names.
	EventTooManyDeletions = "TooManyDeletions"
	// EventInvalidTTLAnnotation: the Job's batch.deckhand.dev/ttl does not
	// parse; the Job is kept (on the Job).
	EventInvalidTTLAnnotation = "InvalidTTLAnnotation"
)

// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=batch.deckhand.dev,resources=jobwatchers;clusterjobwatchers,verbs=get;list;watch

// Setup registers, as one unit, the controller that deletes Jobs and the
// status controllers of both watcher kinds.
func Setup(mgr ctrl.Manager, opts setupoptions.Options) error {
	protected, specs := ProtectedNamespaces(opts), NewCompiledSpecs()
	recorder := mgr.GetEventRecorder(ControllerName)
	jobWatchers := NewStatusReconciler(mgr.GetClient(), mgr.GetCache(), recorder, false, protected, specs)
	clusterJobWatchers := NewStatusReconciler(mgr.GetClient(), mgr.GetCache(), recorder, true, protected, specs)
	clientset, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("creating the clientset that reads pod logs: %w", err)
	}
	jobs := NewJobReconciler(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetCache(), recorder, ClientsetLogs(clientset),
		jobWatchers, clusterJobWatchers, protected, specs)
	err = ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		// One handler for every Job event (jobEvents): the Job itself, the
		// initial list by due time, history peers, the history memo. Four
		// watches made the scoped cache expand each Job event four times
		// for this controller alone, at a start for every Job listed.
		Watches(&batchv1.Job{}, jobs.jobEvents()).
		Watches(&deckhandbatchv1.JobWatcher{}, jobs.watcherEvents()).
		Watches(&deckhandbatchv1.ClusterJobWatcher{}, jobs.watcherEvents()).
		// Deleting is a DELETE per due Job and a GET of its watcher shared
		// by the Jobs judged while another read of it was under way
		// (jobwatcher_delete.go); a few in parallel keep a burst of expiries
		// (a new watcher over old Jobs) short. 8 rather than 4: the more
		// workers, the more Jobs share a read of their watcher (1,000 due
		// Jobs of one watcher on envtest: 0.60 watcher GETs a Job with 4,
		// 0.33 with 8, 0.18 with 16) and the faster the drain (4: 202-262
		// Jobs a second, 8: 275-383, 16: 340; shared machine), while a
		// watcher's breaker bounds what any one of them deletes.
		WithOptions(controller.Options{MaxConcurrentReconciles: 8, LogConstructor: jobLogs(mgr.GetLogger())}).
		Complete(jobs)
	if err != nil {
		return fmt.Errorf("setting up the jobwatcher controller: %w", err)
	}
	for _, r := range []*StatusReconciler{jobWatchers, clusterJobWatchers} {
		err := ctrl.NewControllerManagedBy(mgr).
			Named(r.name()).
			// Woken by a spec change, and by a status another writer
			// changed (a late write of an older leader, a user's edit).
			For(r.newWatcher(), builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, r.status.WrittenByOthers(), resumeAnnotationChanged))).
			Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(r.watchersOf),
				builder.WithPredicates(predicate.Funcs{UpdateFunc: jobChangedForStatus})).
			WatchesRawSource(source.Channel(r.deleted.notify, &handler.EnqueueRequestForObject{})).
			// Every event of a watcher makes the watchers watchersOf
			// remembers stale.
			Watches(r.newWatcher(), r.watcherEvents()).
			Complete(r)
		if err != nil {
			return fmt.Errorf("setting up the %s controller: %w", r.name(), err)
		}
	}
	return nil
}

// jobLogs gives the controller's logs the keys For(&batchv1.Job{}) gave
// them before its Job watches became one handler (jobEvents): the
// controller reconciles Jobs, and log queries look for them.
func jobLogs(base logr.Logger) func(*reconcile.Request) logr.Logger {
	log := base.WithValues("controller", ControllerName, "controllerGroup", batchv1.GroupName, "controllerKind", "Job")
	return func(req *reconcile.Request) logr.Logger {
		if req == nil {
			return log
		}
		if isHistoryPass(*req) {
			return log.WithValues("historyPass", req.Namespace, "namespace", req.Namespace)
		}
		return log.WithValues("Job", klog.KRef(req.Namespace, req.Name), "namespace", req.Namespace, "name", req.Name)
	}
}

// JobReconciler deletes each finished Job when the policy that governs it
// says so. It is keyed by Job: a finished Job that is not due yet is requeued
// for its expiry, so nothing lists or polls.
type JobReconciler struct {
	// Client reads from the manager's cache and deletes.
	client.Client
	// APIReader reads past the cache: the last look before a delete.
	APIReader client.Reader
	// Jobs reads a namespace's Jobs one at a time (scopedcache.Each): the
	// manager's cache. Without it, Client lists them.
	Jobs     client.Reader
	Recorder events.EventRecorder
	Now      func() time.Time
	// Logs reads the end of a failed container's log for a failure record;
	// nil records none.
	Logs PodLogs

	// deleted tells the status controllers of each kind which watcher
	// deleted a Job.
	deleted, clusterDeleted *ledger
	// histories memoizes each namespace's history between changes of its
	// Jobs.
	histories *historyMemo
	// watchers memoizes each namespace's watchers for the handlers of Job
	// events, between events of the watchers.
	watchers *watcherMemo
	// watcherReads coalesces the reads of governing watchers past the
	// cache that deletions rest on.
	watcherReads watcherReads
	// historyLists shares the lists of a namespace past the cache that
	// deletions for a history limit rest on.
	historyLists historyLists
	// protection is the namespaces ClusterJobWatchers leave alone.
	protection *protection
	// specs holds the watchers' compiled specs, shared with the status
	// controllers.
	specs *CompiledSpecs
	// queue is the controller's queue, kept from the first Job event for
	// the passes of history (historyPass) to queue Jobs into.
	queue atomic.Pointer[jobQueue]
}

// NewJobReconciler returns a JobReconciler that reads failed containers' logs
// through logs (none when nil), credits deletions to the JobWatcher and
// ClusterJobWatcher status controllers (jobWatchers, clusterJobWatchers),
// keeps ClusterJobWatchers out of the protected namespaces (nil: the
// defaults) and those c shows labelled deckhand.dev/protected=true, and
// compiles watchers through specs (shared with the status controllers).
func NewJobReconciler(c client.Client, apiReader, jobs client.Reader, rec events.EventRecorder, logs PodLogs,
	jobWatchers, clusterJobWatchers *StatusReconciler, protected []string, specs *CompiledSpecs) *JobReconciler {
	r := &JobReconciler{Client: c, APIReader: apiReader, Jobs: jobs, Recorder: rec, Now: time.Now, Logs: logs,
		deleted: jobWatchers.deleted, clusterDeleted: clusterJobWatchers.deleted,
		histories: newHistoryMemo(), protection: newProtection(protected, c), specs: specs}
	r.watchers = newWatcherMemo(func(ctx context.Context, ns string) ([]*compiledWatcher, error) {
		return listWatchers(ctx, r.Client, ns, r.protection, r.specs)
	})
	return r
}

// Reconcile judges one Job from the cache and, once it is due, deletes it
// (or, in dry run, reports it).
func (r *JobReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if isHistoryPass(req) {
		return ctrl.Result{}, r.passHistory(ctx, req.Namespace)
	}
	job := &batchv1.Job{}
	if err := r.Get(ctx, req.NamespacedName, job); err != nil || !job.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	watchers, h, err := r.observe(ctx, job.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := decide(job, watchers, h)
	now := r.Now()
	switch {
	case d.Verdict == verdictBadAnnotation:
		r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, EventInvalidTTLAnnotation, "Keep",
			"annotation %s=%q is not a non-negative duration (like 90s or 36h); the Job is kept",
			deckhandbatchv1.TTLAnnotation, job.Annotations[deckhandbatchv1.TTLAnnotation])
		return ctrl.Result{}, nil
	case d.Verdict != verdictExpires:
		return ctrl.Result{}, nil
	case !d.due(now):
		return untilExpiry(d.Expiry.Sub(now)), nil
	case d.Governor.spec.Suspend:
		// Resuming the watcher requeues its Jobs.
		return ctrl.Result{}, nil
	case d.Governor.spec.DryRun:
		r.reportWouldDelete(job, d)
		return ctrl.Result{}, nil
	}
	return r.delete(ctx, job, d, watchers, h)
}

// normalPriority is the priority queue's default, which every event after
// the initial list gets (controller-runtime queues the initial list's at
// handler.LowPriority).
const normalPriority = 0

// untilExpiry requeues a Job for its expiry at normal priority. A requeue
// keeps the priority of the request it came from unless told otherwise, so
// a Job first seen in the initial list (finished shortly before the
// manager started) would fall due at low priority, behind every Job of a
// backlog that other watchers' history left due at the start, and wait for
// the whole drain (5 s at 1,000 Jobs). A Job falling due is new work, as
// one that finishes after the start is.
func untilExpiry(after time.Duration) ctrl.Result {
	return ctrl.Result{RequeueAfter: after, Priority: ptr.To(normalPriority)}
}

// observe reads from the cache the watchers that may govern the Jobs of
// namespace ns and, when one has a history limit, which Jobs are beyond it.
func (r *JobReconciler) observe(ctx context.Context, ns string) ([]*compiledWatcher, history, error) {
	watchers, err := listWatchers(ctx, r.Client, ns, r.protection, r.specs)
	if err != nil {
		return nil, nil, err
	}
	h, err := r.historyIn(ctx, ns, watchers)
	if err != nil {
		return nil, nil, err
	}
	return watchers, h, nil
}

// historyIn is which Jobs of namespace ns are beyond the history limits of
// watchers (none without a limit), memoized between changes of its Jobs.
func (r *JobReconciler) historyIn(ctx context.Context, ns string, watchers []*compiledWatcher) (history, error) {
	if !anyHistoryLimits(watchers) {
		return nil, nil
	}
	return r.histories.get(ns, watchers, func() (history, error) {
		h, err := historyFrom(watchers, jobsIn(ctx, r.Jobs, r.Client, ns))
		if err != nil {
			return nil, fmt.Errorf("reading the Jobs of namespace %s: %w", ns, err)
		}
		return h, nil
	})
}

// reportWouldDelete records, in dry run, that the governor would have
// deleted the due Job.
func (r *JobReconciler) reportWouldDelete(job *batchv1.Job, d decision) {
	gov, expired := d.Governor, d.Expiry.UTC().Format(time.RFC3339)
	r.Recorder.Eventf(job, gov.watcher, corev1.EventTypeNormal, EventWouldDelete, "DryRun",
		"%s would delete this %s Job: it expired at %s", gov.key(), d.Outcome, expired)
	r.Recorder.Eventf(gov.watcher, job, corev1.EventTypeNormal, EventWouldDelete, "DryRun",
		"would delete %s Job %s/%s: it expired at %s", d.Outcome, job.Namespace, job.Name, expired)
	countJob(d, resultWouldDelete)
}

// ledgerOf is the ledger of the governor's kind.
func (r *JobReconciler) ledgerOf(gov *compiledWatcher) *ledger {
	if gov.cluster {
		return r.clusterDeleted
	}
	return r.deleted
}

// eachInReach hands fn the finished Jobs a watcher could govern, so that a
// new, changed or removed watcher re-judges them: this is how Jobs that
// existed before a watcher (or before the operator started) are found. It
// reads only the cache, one Job at a time.
func (r *JobReconciler) eachInReach(ctx context.Context, obj client.Object, fn func(*batchv1.Job)) {
	p := r.specs.watcherOf(obj, r.protection)
	if p == nil {
		return
	}
	err := jobsIn(ctx, r.Jobs, r.Client, obj.GetNamespace())(func(job *batchv1.Job) error {
		// Judged on reach, not on the (possibly changed) patterns: a watcher
		// that stops matching a Job may hand it to another one.
		if (p.err != nil || p.reaches(job.Namespace)) && governable(job) {
			fn(job)
		}
		return nil
	})
	if err != nil {
		logf.FromContext(ctx).Error(err, "reading Jobs for watcher", "watcher", p.key().String())
	}
}

// jobEvents is the controller's one handler of Job events, which decides
// for each event what the four watches it replaces decided, with their
// predicates, in this order:
//   - every event makes the memoized history of the Job's namespace stale
//     (historyMemo), first, so that what follows counts this Job, but that
//     of a Job going (deleted, or given a deletion timestamp) that the
//     history put beyond a limit (historyMemo.gone);
//   - a governable Job (governable) of the initial list is queued by when it
//     falls due (enqueueListed);
//   - a governable Job created after the start, or updated, is queued;
//   - one created after the start, or that becomes governable, may push
//     older ones beyond a history limit: a pass over its namespace is
//     queued, which queues them (historyPass, coalesced by the queue: a
//     burst of events costs a pass or two, not one each). Not for the
//     initial list: each of its Jobs is judged, its history included, on
//     its own, and a pass per listed Job would list the namespace N times.
//
// One handler, because the scoped cache hands each handler registration a
// Job expanded from its compact form (internal/scopedcache/compact.go): four
// watches of Jobs made a start expand every listed Job four times for this
// controller alone, on the path the controller's workers wait for.
func (r *JobReconciler) jobEvents() handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) {
			r.histories.changed(e.Object.GetNamespace())
			job, ok := e.Object.(*batchv1.Job)
			switch {
			case !ok || !governable(job):
			case e.IsInInitialList:
				r.enqueueListed(ctx, job, q)
			default:
				q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(job)})
				r.queueHistoryPass(job.Namespace, q)
			}
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q queue) {
			if e.ObjectNew.GetDeletionTimestamp().IsZero() {
				r.histories.changed(e.ObjectNew.GetNamespace())
			} else {
				r.histories.gone(e.ObjectNew.GetNamespace(), e.ObjectNew.GetName())
			}
			if !governableObject(e.ObjectNew) {
				return
			}
			q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.ObjectNew)})
			if !governableObject(e.ObjectOld) {
				r.queueHistoryPass(e.ObjectNew.GetNamespace(), q)
			}
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ queue) {
			r.histories.gone(e.Object.GetNamespace(), e.Object.GetName())
		},
	}
}

// recentlyDue is how long ago a Job of the initial list may have fallen due
// and still be queued as new work: a restart's gap (a rollout, a failover)
// is seconds to a minute, and what fell due in it is the flow of Jobs the
// gap interrupted, not history.
const recentlyDue = time.Minute

// enqueueListed queues a Job of the initial list (a start, a failover, a
// namespace whose Jobs the cache starts to hold) by when it falls due.
// controller-runtime queues the whole initial list at low priority, so that
// Jobs falling due after the start go first; but a Job of the list that
// falls due seconds later, or fell due during the restart's gap, is that
// same flow, and behind a backlog of history (thousands of Jobs past their
// TTL on a cluster Deckhand is installed on) it waited for the whole drain:
// another watcher's Jobs 5 s late while 1,000 were deleted. So a Job not due
// yet is queued for its expiry, at normal priority, without being judged
// now; one due within recentlyDue at normal priority; the rest (history,
// and every Job whose expiry the cache cannot tell alone: history limits,
// no watcher yet) at low priority, judged by Reconcile as before. It reads
// only the cache, and writes nothing: it runs on a follower too.
//
// One Job of one namespace: it reads the memo directly, with no jobEnqueuer
// (built per listed Job, it cost a start over 10,000 Jobs 10,000 enqueuers
// and 20,000 maps; TestAListedJobAllocatesOnlyItsDecision).
func (r *JobReconciler) enqueueListed(ctx context.Context, job *batchv1.Job, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(job)}
	pq, isPriority := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !isPriority {
		q.Add(req)
		return
	}
	pq.AddWithOpts(listedOpts(job, r.knownWatchers(ctx, job.Namespace), r.Now()), req)
}

// watcherEvents handles the events of a watcher: each makes the memoized
// watchers stale (watcherMemo), first; a spec change, and an acknowledged
// deletion circuit breaker, bring the watcher's Jobs back (watcherJobs).
func (r *JobReconciler) watcherEvents() handler.EventHandler {
	return watcherEvents{memo: r.watchers, next: r.watcherJobs(),
		pass: predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, resumeAnnotationChanged)}
}

// watcherJobs handles the events of a watcher: the finished Jobs in its
// reach (before and after a change) are judged again, each queued by when
// it falls due, as the initial list's are. A new watcher over a namespace
// with history (the usual backlog at install), or a spec change that
// brings thousands of old Jobs past their TTL, is bulk work: queued at
// normal priority it held every other watcher's Jobs falling due meanwhile
// behind all of it; its history now goes at low priority.
func (r *JobReconciler) watcherJobs() handler.EventHandler {
	reached := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], watchers ...client.Object) {
		e := r.enqueuer(ctx, q)
		for _, w := range watchers {
			r.eachInReach(ctx, w, e.add)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			reached(ctx, q, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			reached(ctx, q, e.ObjectNew, e.ObjectOld)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			reached(ctx, q, e.Object)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			reached(ctx, q, e.Object)
		},
	}
}

// jobEnqueuer queues each Job it is given once, by when it falls due
// (queueListed), the watchers of each namespace read once from the memo
// (watcherMemo).
type jobEnqueuer struct {
	ctx        context.Context
	r          *JobReconciler
	q          workqueue.TypedRateLimitingInterface[reconcile.Request]
	now        time.Time
	seen       map[reconcile.Request]bool
	watchersOf map[string][]*compiledWatcher // nil: unknown (an error, a history limit)
}

func (r *JobReconciler) enqueuer(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) *jobEnqueuer {
	return &jobEnqueuer{ctx: ctx, r: r, q: q, now: r.Now(), seen: map[reconcile.Request]bool{}, watchersOf: map[string][]*compiledWatcher{}}
}

func (e *jobEnqueuer) add(job *batchv1.Job) {
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(job)}
	if e.seen[req] {
		return
	}
	e.seen[req] = true
	pq, isPriority := e.q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !isPriority {
		e.q.Add(req)
		return
	}
	watchers, ok := e.watchersOf[job.Namespace]
	if !ok {
		watchers = e.r.knownWatchers(e.ctx, job.Namespace)
		e.watchersOf[job.Namespace] = watchers
	}
	pq.AddWithOpts(listedOpts(job, watchers, e.now), req)
}

// knownWatchers are the memoized watchers of namespace ns when the cache
// alone tells when its Jobs fall due; nil when it cannot (an error, a
// history limit).
func (r *JobReconciler) knownWatchers(ctx context.Context, ns string) []*compiledWatcher {
	watchers, err := r.watchers.get(ctx, ns)
	if err != nil || anyHistoryLimits(watchers) {
		return nil
	}
	return watchers
}

// listedOpts is how a listed job is queued at now, decided with watchers
// (nil: unknown, judged later at low priority).
func listedOpts(job *batchv1.Job, watchers []*compiledWatcher, now time.Time) priorityqueue.AddOpts {
	if watchers == nil {
		return queueListed(time.Time{}, false, now)
	}
	d := decide(job, watchers, nil)
	return queueListed(d.Expiry, d.Verdict == verdictExpires, now)
}

// queueListed is how a Job of the initial list that expires at expiry
// (known: the cache alone tells when) is queued at now.
func queueListed(expiry time.Time, known bool, now time.Time) priorityqueue.AddOpts {
	switch {
	case !known || now.Sub(expiry) >= recentlyDue:
		return priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}
	case expiry.After(now):
		return priorityqueue.AddOpts{After: expiry.Sub(now), Priority: ptr.To(normalPriority)}
	default:
		return priorityqueue.AddOpts{Priority: ptr.To(normalPriority)}
	}
}

// governableObject is governable for the objects of a Job event.
func governableObject(obj client.Object) bool {
	job, ok := obj.(*batchv1.Job)
	return ok && governable(job)
}

// governable reports whether a Job is one a watcher could delete: finished,
// without its own ttlSecondsAfterFinished, not already going.
func governable(job *batchv1.Job) bool {
	_, _, done := finished(job)
	return done && job.Spec.TTLSecondsAfterFinished == nil && job.DeletionTimestamp.IsZero()
}

// jobChangedForStatus passes the Job updates that can change a watcher's
// status: not the progress of a running Job, only what matching and
// precedence read.
func jobChangedForStatus(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*batchv1.Job)
	n, ok2 := e.ObjectNew.(*batchv1.Job)
	if !ok1 || !ok2 {
		return true
	}
	oo, ot, of := finished(o)
	no, nt, nf := finished(n)
	return oo != no || !ot.Equal(nt) || of != nf ||
		!equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
		!equality.Semantic.DeepEqual(o.Annotations, n.Annotations) ||
		!equality.Semantic.DeepEqual(o.Spec.TTLSecondsAfterFinished, n.Spec.TTLSecondsAfterFinished) ||
		!o.DeletionTimestamp.Equal(n.DeletionTimestamp)
}
