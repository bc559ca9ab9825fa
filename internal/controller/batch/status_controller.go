package batch

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

// +kubebuilder:rbac:groups=batch.deckhand.dev,resources=jobwatchers/status;clusterjobwatchers/status,verbs=get;update;patch

// statusReconciler keeps the status of one watcher kind. It reads only the
// cache; it writes when the status changed, and comes back when the next Job
// it governs expires.
type statusReconciler struct {
	client client.Client
	// cluster is true for ClusterJobWatchers.
	cluster bool
	deleted *ledger
	now     func() time.Time
}

func (r *statusReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj, self, status, err := r.get(ctx, req.NamespacedName)
	if obj == nil || err != nil {
		return ctrl.Result{}, err
	}
	start := r.now()
	// A JobWatcher's Jobs, and the JobWatchers that compete for them, are in
	// its namespace; a ClusterJobWatcher's may be anywhere (req.Namespace is
	// empty).
	policies, err := listPolicies(ctx, r.client, req.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	var jobs batchv1.JobList
	if err := r.client.List(ctx, &jobs, client.InNamespace(req.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing Jobs: %w", err)
	}
	s := summarize(self, policies, jobs.Items, start)
	var result ctrl.Result
	if s.Next != nil {
		result.RequeueAfter = s.Next.Sub(start)
	}

	deleted := r.deleted.pending(obj.GetUID())
	next := computeStatus(status, self, s, deleted)
	if !statusChanged(status, &next) {
		return result, nil
	}
	next.LastRunStartTime, next.LastRunEndTime = &metav1.Time{Time: start}, &metav1.Time{Time: r.now()}
	// The optimistic lock keeps deletedJobs from being added to a stale copy.
	patch := client.MergeFromWithOptions(obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	*status = next
	if err := r.client.Status().Patch(ctx, obj, patch); apierrors.IsConflict(err) {
		// The cached copy was behind (status writes do not wake this
		// controller): count again shortly.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("updating status of %s: %w", self.key(), err)
	}
	r.deleted.ack(obj.GetUID(), deleted)
	return result, nil
}

// get reads the watcher from the cache and compiles it; obj is nil when it is
// gone.
func (r *statusReconciler) get(ctx context.Context, key client.ObjectKey) (client.Object, *policy, *deckhandbatchv1.JobWatcherStatus, error) {
	if r.cluster {
		w := &deckhandbatchv1.ClusterJobWatcher{}
		if err := r.client.Get(ctx, key, w); err != nil {
			return nil, nil, nil, client.IgnoreNotFound(err)
		}
		return w, newClusterJobWatcherPolicy(w), &w.Status, nil
	}
	w := &deckhandbatchv1.JobWatcher{}
	if err := r.client.Get(ctx, key, w); err != nil {
		return nil, nil, nil, client.IgnoreNotFound(err)
	}
	return w, newJobWatcherPolicy(w), &w.Status, nil
}

// watchersOf maps a Job event to the watchers of this kind that reach the
// Job's namespace. It reads only the cache.
func (r *statusReconciler) watchersOf(ctx context.Context, job client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	if !r.cluster {
		var list deckhandbatchv1.JobWatcherList
		if err := r.client.List(ctx, &list, client.InNamespace(job.GetNamespace())); err != nil {
			logf.FromContext(ctx).Error(err, "listing JobWatchers for Job", "job", klog.KObj(job))
			return nil
		}
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	}
	var list deckhandbatchv1.ClusterJobWatcherList
	if err := r.client.List(ctx, &list); err != nil {
		logf.FromContext(ctx).Error(err, "listing ClusterJobWatchers for Job", "job", klog.KObj(job))
		return nil
	}
	for i := range list.Items {
		// An invalid watcher is woken too: its status says why it is idle.
		if p := newClusterJobWatcherPolicy(&list.Items[i]); p.err != nil || p.reaches(job.GetNamespace()) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}
