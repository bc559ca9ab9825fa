// Package batch runs JobWatchers and ClusterJobWatchers: it deletes finished
// Jobs when the policy that governs each one says so, and keeps the watchers'
// status.
package batch

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/internal/setup"
)

// ControllerName names the controller that deletes Jobs in --controllers,
// logs, metrics and Events. It runs JobWatchers and ClusterJobWatchers
// together because precedence needs both: with ClusterJobWatchers alone, a
// namespace's own JobWatchers would be ignored and Jobs could go sooner than
// they allow.
const ControllerName = "jobwatcher"

// Setup registers, as one unit, the controller that deletes Jobs and the
// status controllers of both watcher kinds.
func Setup(mgr ctrl.Manager, _ setup.Options) error {
	deleted := newLedger()
	jobs := &jobReconciler{
		client:    mgr.GetClient(),
		apiReader: mgr.GetAPIReader(),
		recorder:  mgr.GetEventRecorder(ControllerName),
		deleted:   deleted,
		now:       time.Now,
	}
	watcherChanged := builder.WithPredicates(predicate.GenerationChangedPredicate{})
	err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&batchv1.Job{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(e event.CreateEvent) bool { return isGovernable(e.Object) },
			UpdateFunc: func(e event.UpdateEvent) bool { return isGovernable(e.ObjectNew) },
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		})).
		Watches(&deckhandbatchv1.JobWatcher{}, handler.EnqueueRequestsFromMapFunc(jobs.jobsInReach), watcherChanged).
		Watches(&deckhandbatchv1.ClusterJobWatcher{}, handler.EnqueueRequestsFromMapFunc(jobs.jobsInReach), watcherChanged).
		// Deleting is two requests per due Job; a few in parallel keep a
		// burst of expiries (a new watcher over old Jobs) short.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(jobs)
	if err != nil {
		return fmt.Errorf("setting up the jobwatcher controller: %w", err)
	}

	for _, r := range []*statusReconciler{
		{client: mgr.GetClient(), deleted: deleted, now: time.Now},
		{client: mgr.GetClient(), cluster: true, deleted: deleted, now: time.Now},
	} {
		var watcher client.Object = &deckhandbatchv1.JobWatcher{}
		name := "jobwatcher-status"
		if r.cluster {
			watcher, name = &deckhandbatchv1.ClusterJobWatcher{}, "clusterjobwatcher-status"
		}
		err := ctrl.NewControllerManagedBy(mgr).
			Named(name).
			For(watcher, watcherChanged).
			Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(r.watchersOf),
				builder.WithPredicates(predicate.Funcs{UpdateFunc: jobChangedForStatus})).
			WatchesRawSource(source.Channel(deleted.notify[r.cluster], &handler.EnqueueRequestForObject{})).
			Complete(r)
		if err != nil {
			return fmt.Errorf("setting up the %s controller: %w", name, err)
		}
	}
	return nil
}

func isGovernable(obj client.Object) bool {
	job, ok := obj.(*batchv1.Job)
	return ok && governable(job)
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
