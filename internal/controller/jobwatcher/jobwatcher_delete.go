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

// delete deletes a Job the cache showed due (d, judged at Reconcile). The
// cache may be behind the API server, so nothing irreversible rests on it
// alone:
//   - the DELETE carries the UID and resourceVersion of the Job the decision
//     was made on as preconditions, so the API server deletes exactly that
//     version or nothing: a Job replaced or changed in between (annotated
//     keep, given its own TTL) is left alone. That is a check past the
//     cache, atomic with the delete, which a read before it is not. A cache
//     behind the API server gets 409 Conflict: the Job is then read past
//     the cache and judged again (judgeFresh), and deleted on that read's
//     resourceVersion, as Kubernetes' TTL controller does;
//   - a Job whose deletion needs more than the cache holds is read past the
//     cache first: a failed Job whose failure is recorded (the record needs
//     its conditions' reasons and its pods), and one that goes for a
//     history limit (the namespace's Jobs are listed past the cache, by a
//     list that started after the Job was judged and that the Jobs judged
//     meanwhile share: historyLists; a lagging cache can show a newer Job
//     that is gone, or miss one that finished);
//   - the watcher that governs it is read past the cache by a read that
//     started after the Job was judged (watcherReads): gone, going, or
//     changed since the cache saw it, and the Job is judged again once the
//     cache shows the change.
//
// The other watchers are judged as the cache shows them, as every other
// decision of the controller: a change of one is in effect once its
// status.observedGeneration shows it (docs/guides/jobwatcher.md, "Safe deletion").
func (r *JobReconciler) delete(ctx context.Context, cached *batchv1.Job, d decision, watchers []*compiledWatcher, h history) (ctrl.Result, error) {
	now := r.Now()
	job := cached
	if needsFreshJob(d) {
		fresh, fd, res, done, err := r.judgeFresh(ctx, cached, d, watchers, h, now)
		if done || err != nil {
			return res, err
		}
		job, d = fresh, fd
	}
	gov := d.Governor
	if !r.ledgerOf(gov).admit(gov, job.Namespace+"/"+job.Name, now) {
		// The deletion circuit breaker tripped: the owner's
		// acknowledgement or a spec change brings the Job back.
		countJob(d, resultHeld)
		return ctrl.Result{}, nil
	}
	res, conflict, err := r.act(ctx, job, d, now)
	if !conflict || job != cached {
		return res, err
	}
	// The cache is behind the API server, or the Job changed since it
	// showed it: judged again on what the API server holds now.
	fresh, fd, res, done, err := r.judgeFresh(ctx, cached, d, watchers, h, now)
	if done || err != nil {
		return res, err
	}
	if fd.Governor.key() != gov.key() && !r.ledgerOf(fd.Governor).admit(fd.Governor, fresh.Namespace+"/"+fresh.Name, now) {
		countJob(fd, resultHeld)
		return ctrl.Result{}, nil
	}
	res, _, err = r.act(ctx, fresh, fd, now)
	return res, err
}

// needsFreshJob reports whether deleting a Job decided by d needs more of
// it than the cache holds: its failure record (conditions' reasons, pods by
// UID), or the namespace's Jobs read past the cache for a history limit.
func needsFreshJob(d decision) bool {
	return d.BeyondHistory || recordsFailure(d)
}

// recordsFailure reports whether the Job's failure is recorded before it
// goes.
func recordsFailure(d decision) bool {
	return d.Outcome == outcomeFailed && d.Governor.failureRecords() > 0
}

// judgeFresh reads the Job past the cache and judges it again: for a Job
// the cached decision d put beyond a history limit, from a list of the
// namespace's Jobs past the cache (which the history is judged on too:
// freshHistory), else by a GET. done says there is nothing to delete now
// (res says when to look again): the Job is gone, replaced, going, no
// longer due, or waits for the list of its namespace.
//
//nolint:gocyclo // a list of checks on one fresh read, each a return; splitting it would scatter the order they are made in
func (r *JobReconciler) judgeFresh(ctx context.Context, cached *batchv1.Job, d decision, watchers []*compiledWatcher, h history, now time.Time) (
	fresh *batchv1.Job, fd decision, res ctrl.Result, done bool, err error) {
	listed := d.BeyondHistory
	if listed {
		var answered bool
		if fresh, h, answered, err = r.freshHistory(ctx, cached, watchers); !answered && err == nil {
			return nil, decision{}, ctrl.Result{RequeueAfter: historyRecheck}, true, nil
		}
	} else {
		fresh, err = r.getJob(ctx, cached)
	}
	if err != nil || fresh == nil || fresh.UID != cached.UID || !fresh.DeletionTimestamp.IsZero() {
		return nil, decision{}, ctrl.Result{}, true, err
	}
	fd = decide(fresh, watchers, h)
	if fd.Verdict == verdictExpires && fd.BeyondHistory && !listed {
		var answered bool
		if fresh, h, answered, err = r.freshHistory(ctx, fresh, watchers); !answered && err == nil {
			return nil, decision{}, ctrl.Result{RequeueAfter: historyRecheck}, true, nil
		}
		if err != nil || fresh == nil || fresh.UID != cached.UID {
			return nil, decision{}, ctrl.Result{}, true, err
		}
		listed = true
		fd = decide(fresh, watchers, h)
	}
	if listed && fd.Verdict == verdictExpires && recordsFailure(fd) {
		// A list keeps what the cache keeps of a Job; its failure record
		// needs the whole Job (its conditions' reasons).
		if fresh, err = r.getJob(ctx, fresh); err != nil || fresh == nil || fresh.UID != cached.UID || !fresh.DeletionTimestamp.IsZero() {
			return nil, decision{}, ctrl.Result{}, true, err
		}
		fd = decide(fresh, watchers, h)
	}
	switch {
	case fd.Verdict != verdictExpires || fd.Governor.spec.Suspend || fd.Governor.spec.DryRun:
		// The Job changed after the cache saw it; its update event brings
		// it back.
		return nil, decision{}, ctrl.Result{}, true, nil
	case !fd.due(now):
		return nil, decision{}, untilExpiry(fd.Expiry.Sub(now)), true, nil
	}
	return fresh, fd, ctrl.Result{}, false, nil
}

// getJob reads job past the cache; nil when it is gone.
func (r *JobReconciler) getJob(ctx context.Context, job *batchv1.Job) (*batchv1.Job, error) {
	fresh := &batchv1.Job{}
	jobAPIRequests.WithLabelValues(resourceJobs, "get").Inc()
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(job), fresh)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return fresh, nil
}

// act deletes job, judged due by d at now: its failure record saved first
// when its governor keeps them (job is then a read past the cache:
// needsFreshJob), its governor read past the cache after that judgement,
// then the DELETE with job's UID and resourceVersion as preconditions.
// conflict reports that the API server holds another version of the Job
// than job (409 Conflict), which is then not deleted.
func (r *JobReconciler) act(ctx context.Context, job *batchv1.Job, d decision, now time.Time) (res ctrl.Result, conflict bool, err error) {
	gov := d.Governor
	if recordsFailure(d) {
		// Recorded first: deleting the Job destroys the evidence.
		if err := r.ledgerOf(gov).save(ctx, gov.watcher, r.recordFailure(ctx, job, now, !gov.cluster)); err != nil {
			return ctrl.Result{}, false, err
		}
	}
	if changed, err := r.watcherChanged(ctx, gov); err != nil || changed {
		// Gone, going or changed: its event (and the cache catching up)
		// brings its Jobs back, judged on what it is now.
		return ctrl.Result{RequeueAfter: watcherRecheck}, false, err
	}
	jobAPIRequests.WithLabelValues(resourceJobs, "delete").Inc()
	err = r.Delete(ctx, job,
		client.Preconditions{UID: &job.UID, ResourceVersion: &job.ResourceVersion},
		client.PropagationPolicy(gov.propagation()))
	switch {
	case apierrors.IsNotFound(err):
		// Gone already.
		return ctrl.Result{}, false, nil
	case apierrors.IsConflict(err):
		// Another version than the one judged: replaced, or changed since.
		return ctrl.Result{}, true, nil
	case err != nil:
		countJob(d, resultError)
		r.Recorder.Eventf(gov.watcher, job, corev1.EventTypeWarning, EventDeleteFailed, "Delete",
			"deleting Job %s/%s: %v", job.Namespace, job.Name, err)
		return ctrl.Result{}, false, fmt.Errorf("deleting Job %s: %w", klog.KObj(job), err)
	}
	r.recordDeleted(ctx, job, d, now)
	return ctrl.Result{}, false, nil
}

// watcherRecheck is when a Job whose watcher changed under a deletion is
// judged again, should no event of the watcher bring it back sooner.
const watcherRecheck = 5 * time.Second

// freshHistory returns job as a list of its namespace past the cache holds
// it (nil: gone) and which Jobs that list puts beyond the history limits of
// watchers, from a list that started after job was judged and that the Jobs
// judged meanwhile share (historyLists). answered is false while job waits
// for it: judged again after historyRecheck. A list judged with other
// watchers than these (one changed since it started) answers nothing: the
// Job joins the next list.
func (r *JobReconciler) freshHistory(ctx context.Context, job *batchv1.Job, watchers []*compiledWatcher) (fresh *batchv1.Job, h history, answered bool, err error) {
	a, ok, err := r.historyLists.take(ctx, job, r.listHistory)
	switch {
	case err != nil:
		return nil, nil, true, err
	case !ok || a.fp != historyWatchers(watchers):
		return nil, nil, false, nil
	}
	return a.fresh, a.h, true, nil
}

// watcherChanged reads the governing watcher past the cache, by a read that
// starts after the caller judged its Job (watcherReads), and reports whether
// it is not the one the decision was made with any more: gone, replaced
// (another UID), being deleted, or with a spec the cache has not shown yet
// (another generation).
func (r *JobReconciler) watcherChanged(ctx context.Context, gov *compiledWatcher) (bool, error) {
	live, err := r.watcherReads.read(ctx, gov, r.APIReader)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
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
// namespace when ns is empty) and every ClusterJobWatcher, through specs.
func listWatchers(ctx context.Context, c client.Reader, ns string, prot *protection, specs *CompiledSpecs) ([]*compiledWatcher, error) {
	jws, err := listJobWatchers(ctx, c, ns, specs)
	if err != nil {
		return nil, err
	}
	cjws, err := listClusterJobWatchers(ctx, c, prot, specs)
	if err != nil {
		return nil, err
	}
	return append(jws, cjws...), nil
}

// listJobWatchers compiles the JobWatchers of namespace ns from c (the
// cache), through specs.
func listJobWatchers(ctx context.Context, c client.Reader, ns string, specs *CompiledSpecs) ([]*compiledWatcher, error) {
	var jws deckhandbatchv1.JobWatcherList
	if err := c.List(ctx, &jws, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing JobWatchers: %w", err)
	}
	out := make([]*compiledWatcher, 0, len(jws.Items))
	for i := range jws.Items {
		out = append(out, specs.jobWatcher(&jws.Items[i]))
	}
	return out, nil
}

// listClusterJobWatchers compiles every ClusterJobWatcher from c (the
// cache), under prot, through specs.
func listClusterJobWatchers(ctx context.Context, c client.Reader, prot *protection, specs *CompiledSpecs) ([]*compiledWatcher, error) {
	var cjws deckhandbatchv1.ClusterJobWatcherList
	if err := c.List(ctx, &cjws); err != nil {
		return nil, fmt.Errorf("listing ClusterJobWatchers: %w", err)
	}
	out := make([]*compiledWatcher, 0, len(cjws.Items))
	for i := range cjws.Items {
		out = append(out, specs.clusterJobWatcher(&cjws.Items[i], prot))
	}
	return out, nil
}
