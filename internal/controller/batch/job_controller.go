package batch

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=batch.deckhand.dev,resources=jobwatchers;clusterjobwatchers,verbs=get;list;watch

// jobReconciler deletes each finished Job when the policy that governs it
// says so. It is keyed by Job: a finished Job that is not due yet is requeued
// for its expiry, so nothing lists or polls.
type jobReconciler struct {
	client client.Client
	// apiReader reads past the cache: the last look before a delete.
	apiReader client.Reader
	recorder  events.EventRecorder
	// deleted tells the status controllers which watcher deleted a Job.
	deleted *ledger
	now     func() time.Time
}

func (r *jobReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	job := &batchv1.Job{}
	if err := r.client.Get(ctx, req.NamespacedName, job); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !job.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	policies, err := listPolicies(ctx, r.client, job.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := decide(job, policies)
	if d.Verdict == verdictBadAnnotation {
		r.recorder.Eventf(job, nil, corev1.EventTypeWarning, "InvalidTTLAnnotation", "Keep",
			"annotation %s=%q is not a non-negative duration (like 90s or 36h); the Job is kept",
			deckhandbatchv1.TTLAnnotation, job.Annotations[deckhandbatchv1.TTLAnnotation])
	}
	if d.Verdict != verdictExpires {
		return ctrl.Result{}, nil
	}
	now := r.now()
	if !d.due(now) {
		return ctrl.Result{RequeueAfter: d.Expiry.Sub(now)}, nil
	}
	switch gov := d.Governor; {
	case gov.spec.Suspend:
		// Resuming the watcher requeues its Jobs.
		return ctrl.Result{}, nil
	case gov.spec.DryRun:
		r.recorder.Eventf(job, gov.watcher, corev1.EventTypeNormal, "WouldDelete", "DryRun",
			"%s would delete this %s Job: it expired at %s", gov.key(), d.Outcome, d.Expiry.UTC().Format(time.RFC3339))
		r.recorder.Eventf(gov.watcher, job, corev1.EventTypeNormal, "WouldDelete", "DryRun",
			"would delete %s Job %s/%s: it expired at %s", d.Outcome, job.Namespace, job.Name, d.Expiry.UTC().Format(time.RFC3339))
		countJob(d, resultWouldDelete)
		return ctrl.Result{}, nil
	}
	return r.delete(ctx, job)
}

// delete deletes a due Job the way Kubernetes' TTL controller does: the cache
// may be behind, so the Job is read from the API server and judged again,
// and the delete carries its UID and resourceVersion as preconditions, so a
// Job that was replaced or changed in between (annotated keep, given its own
// TTL) is left alone. The watchers are read past the cache too: one created
// a moment ago may keep the Job longer. All this costs requests only for
// Jobs that are due.
func (r *jobReconciler) delete(ctx context.Context, cached *batchv1.Job) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	fresh := &batchv1.Job{}
	jobAPIRequests.WithLabelValues("get").Inc()
	if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(cached), fresh); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if fresh.UID != cached.UID || !fresh.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	policies, err := listPolicies(ctx, r.apiReader, fresh.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := r.now()
	d := decide(fresh, policies)
	if d.Verdict != verdictExpires {
		return ctrl.Result{}, nil
	}
	if !d.due(now) {
		return ctrl.Result{RequeueAfter: d.Expiry.Sub(now)}, nil
	}
	if d.Governor.spec.Suspend || d.Governor.spec.DryRun {
		// The watcher changed after the cache saw it; its update event
		// brings the Job back.
		return ctrl.Result{}, nil
	}

	gov := d.Governor
	policy := gov.propagation()
	jobAPIRequests.WithLabelValues("delete").Inc()
	err = r.client.Delete(ctx, fresh,
		client.Preconditions{UID: &fresh.UID, ResourceVersion: &fresh.ResourceVersion},
		client.PropagationPolicy(policy))
	switch {
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, nil
	case apierrors.IsConflict(err):
		// It changed since the read; the update event brings it back.
		return ctrl.Result{}, nil
	case err != nil:
		countJob(d, resultError)
		r.recorder.Eventf(gov.watcher, fresh, corev1.EventTypeWarning, "DeleteFailed", "Delete",
			"deleting Job %s/%s: %v", fresh.Namespace, fresh.Name, err)
		return ctrl.Result{}, fmt.Errorf("deleting Job %s: %w", klog.KObj(fresh), err)
	}

	countJob(d, resultDeleted)
	deletionLag.Observe(now.Sub(d.Expiry).Seconds())
	r.deleted.add(ctx, gov.watcher)
	log.Info("deleted finished Job", "watcher", gov.key().String(), "outcome", d.Outcome,
		"finished", d.Expiry.Add(-d.TTL), "ttl", d.TTL, "propagation", policy)
	r.recorder.Eventf(fresh, gov.watcher, corev1.EventTypeNormal, "Deleted", "Delete",
		"deleted by %s: %s %s ago, TTL %s", gov.key(), d.Outcome, now.Sub(d.Expiry.Add(-d.TTL)).Round(time.Second), d.TTL)
	r.recorder.Eventf(gov.watcher, fresh, corev1.EventTypeNormal, "Deleted", "Delete",
		"deleted %s Job %s/%s (TTL %s)", d.Outcome, fresh.Namespace, fresh.Name, d.TTL)
	return ctrl.Result{}, nil
}

// listPolicies compiles, from the cache, the JobWatchers of namespace ns
// (every namespace when ns is empty) and every ClusterJobWatcher.
func listPolicies(ctx context.Context, c client.Reader, ns string) ([]*policy, error) {
	var jws deckhandbatchv1.JobWatcherList
	if err := c.List(ctx, &jws, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing JobWatchers: %w", err)
	}
	var cjws deckhandbatchv1.ClusterJobWatcherList
	if err := c.List(ctx, &cjws); err != nil {
		return nil, fmt.Errorf("listing ClusterJobWatchers: %w", err)
	}
	out := make([]*policy, 0, len(jws.Items)+len(cjws.Items))
	for i := range jws.Items {
		out = append(out, newJobWatcherPolicy(&jws.Items[i]))
	}
	for i := range cjws.Items {
		out = append(out, newClusterJobWatcherPolicy(&cjws.Items[i]))
	}
	return out, nil
}

// jobsInReach maps a watcher event to the finished Jobs the watcher could
// govern, so that a new, changed or removed watcher re-judges them: this is
// how Jobs that existed before a watcher (or before the operator started)
// are found. It reads only the cache.
func (r *jobReconciler) jobsInReach(ctx context.Context, obj client.Object) []reconcile.Request {
	var p *policy
	switch w := obj.(type) {
	case *deckhandbatchv1.JobWatcher:
		p = newJobWatcherPolicy(w)
	case *deckhandbatchv1.ClusterJobWatcher:
		p = newClusterJobWatcherPolicy(w)
	default:
		return nil
	}
	var jobs batchv1.JobList
	if err := r.client.List(ctx, &jobs, client.InNamespace(obj.GetNamespace())); err != nil {
		logf.FromContext(ctx).Error(err, "listing Jobs for watcher", "watcher", p.key().String())
		return nil
	}
	var reqs []reconcile.Request
	for i := range jobs.Items {
		job := &jobs.Items[i]
		// Judged on reach, not on the (possibly changed) patterns: a watcher
		// that stops matching a Job may hand it to another one.
		if (p.err != nil || p.reaches(job.Namespace)) && governable(job) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(job)})
		}
	}
	return reqs
}

// governable reports whether a Job is one a watcher could delete: finished,
// without its own ttlSecondsAfterFinished, not already going.
func governable(job *batchv1.Job) bool {
	_, _, done := finished(job)
	return done && job.Spec.TTLSecondsAfterFinished == nil && job.DeletionTimestamp.IsZero()
}
