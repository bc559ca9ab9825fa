package jobwatcher

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

// delete deletes a due Job the way Kubernetes' TTL controller does: the
// cache may be behind, so the Job is read from the API server and judged
// again, and the delete carries its UID and resourceVersion as
// preconditions, so a Job that was replaced or changed in between (annotated
// keep, given its own TTL, finished again) is left alone. Every other fact
// the deletion rests on is read past the cache too, just before it: the
// Jobs of the namespace when the Job goes for a history limit (a lagging
// cache can show a newer Job that is gone, or miss one that finished), and
// the watcher that governs it (gone, going, or changed since the cache saw
// it: then it is judged again once the cache shows the change). The other
// watchers are judged as the cache shows them, as every other decision of
// the controller: a change of one is in effect once its
// status.observedGeneration shows it (docs/jobwatcher.md, "Safe deletion").
func (r *JobReconciler) delete(ctx context.Context, cached *batchv1.Job, watchers []*compiledWatcher, h history) (ctrl.Result, error) {
	fresh := &batchv1.Job{}
	jobAPIRequests.WithLabelValues("get").Inc()
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(cached), fresh); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if fresh.UID != cached.UID || !fresh.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	now := r.Now()
	d := decide(fresh, watchers, h)
	if d.Verdict == verdictExpires && d.BeyondHistory {
		fh, err := r.freshHistory(ctx, fresh.Namespace, watchers)
		if err != nil {
			return ctrl.Result{}, err
		}
		d = decide(fresh, watchers, fh)
	}
	switch {
	case d.Verdict != verdictExpires || d.Governor.spec.Suspend || d.Governor.spec.DryRun:
		// The Job changed after the cache saw it; its update event brings
		// it back.
		return ctrl.Result{}, nil
	case !d.due(now):
		return untilExpiry(d.Expiry.Sub(now)), nil
	}

	gov := d.Governor
	if !r.ledgerOf(gov).admit(gov, fresh.Namespace+"/"+fresh.Name, now) {
		// The deletion circuit breaker tripped: the owner's
		// acknowledgement or a spec change brings the Job back.
		countJob(d, resultHeld)
		return ctrl.Result{}, nil
	}
	if d.Outcome == outcomeFailed && gov.failureRecords() > 0 {
		// Recorded first: deleting the Job destroys the evidence.
		if err := r.ledgerOf(gov).save(ctx, gov.watcher, r.recordFailure(ctx, fresh, now)); err != nil {
			return ctrl.Result{}, err
		}
	}
	if changed, err := r.watcherChanged(ctx, gov); err != nil || changed {
		// Gone, going or changed: its event (and the cache catching up)
		// brings its Jobs back, judged on what it is now.
		return ctrl.Result{RequeueAfter: watcherRecheck}, err
	}
	jobAPIRequests.WithLabelValues("delete").Inc()
	err := r.Delete(ctx, fresh,
		client.Preconditions{UID: &fresh.UID, ResourceVersion: &fresh.ResourceVersion},
		client.PropagationPolicy(gov.propagation()))
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone, or changed since the read: its update event brings it back.
		return ctrl.Result{}, nil
	case err != nil:
		countJob(d, resultError)
		r.Recorder.Eventf(gov.watcher, fresh, corev1.EventTypeWarning, EventDeleteFailed, "Delete",
			"deleting Job %s/%s: %v", fresh.Namespace, fresh.Name, err)
		return ctrl.Result{}, fmt.Errorf("deleting Job %s: %w", klog.KObj(fresh), err)
	}
	r.recordDeleted(ctx, fresh, d, now)
	return ctrl.Result{}, nil
}

// watcherRecheck is when a Job whose watcher changed under a deletion is
// judged again, should no event of the watcher bring it back sooner.
const watcherRecheck = 5 * time.Second

// freshHistory is which Jobs of namespace ns are beyond the history limits
// of watchers, judged on a list read past the cache.
func (r *JobReconciler) freshHistory(ctx context.Context, ns string, watchers []*compiledWatcher) (history, error) {
	var jobs batchv1.JobList
	jobAPIRequests.WithLabelValues("list").Inc()
	if err := r.APIReader.List(ctx, &jobs, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing Jobs past the cache: %w", err)
	}
	return historyOf(watchers, jobs.Items), nil
}

// watcherChanged reads the governing watcher past the cache and reports
// whether it is not the one the decision was made with any more: gone,
// replaced (another UID), being deleted, or with a spec the cache has not
// shown yet (another generation).
func (r *JobReconciler) watcherChanged(ctx context.Context, gov *compiledWatcher) (bool, error) {
	live, ok := gov.watcher.DeepCopyObject().(client.Object)
	if !ok {
		return true, nil
	}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(gov.watcher), live); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return true, fmt.Errorf("reading %s past the cache: %w", gov.key().Kind, err)
	}
	return live.GetUID() != gov.watcher.GetUID() || !live.GetDeletionTimestamp().IsZero() ||
		live.GetGeneration() != gov.watcher.GetGeneration(), nil
}

// recordDeleted counts a deletion for the governor and logs it. The
// watcher's status controller tells it in an Event on the watcher, one per
// status write for all the deletions since the last: an Event per deletion
// would double the API calls a deletion costs, and one on the Job would go
// with the Job.
func (r *JobReconciler) recordDeleted(ctx context.Context, job *batchv1.Job, d decision, now time.Time) {
	gov := d.Governor
	countJob(d, resultDeleted)
	if !d.BeyondHistory {
		deletionLag.Observe(now.Sub(d.Expiry).Seconds())
	}
	finishedAt := d.Expiry.Add(-d.TTL)
	why := fmt.Sprintf("TTL %s", d.TTL)
	if d.BeyondHistory {
		limit, _ := gov.historyLimit(d.Outcome)
		why = fmt.Sprintf("beyond the history limit of %d", limit)
	}
	name := job.Namespace + "/" + job.Name
	r.ledgerOf(gov).add(ctx, gov.watcher, deletedJob{name: name, note: fmt.Sprintf("deleted %s Job %s (%s)", d.Outcome, name, why)})
	logf.FromContext(ctx).Info("deleted finished Job", "job", klog.KObj(job), "watcher", gov.key().String(), "outcome", d.Outcome,
		"finished", finishedAt, "ttl", d.TTL, "propagation", gov.propagation())
}

// listWatchers compiles, from c (the cache), the JobWatchers of namespace ns (every
// namespace when ns is empty) and every ClusterJobWatcher.
func listWatchers(ctx context.Context, c client.Reader, ns string) ([]*compiledWatcher, error) {
	var jws deckhandbatchv1.JobWatcherList
	if err := c.List(ctx, &jws, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing JobWatchers: %w", err)
	}
	var cjws deckhandbatchv1.ClusterJobWatcherList
	if err := c.List(ctx, &cjws); err != nil {
		return nil, fmt.Errorf("listing ClusterJobWatchers: %w", err)
	}
	out := make([]*compiledWatcher, 0, len(jws.Items)+len(cjws.Items))
	for i := range jws.Items {
		out = append(out, compileJobWatcher(&jws.Items[i]))
	}
	for i := range cjws.Items {
		out = append(out, compileClusterJobWatcher(&cjws.Items[i]))
	}
	return out, nil
}
