package podset

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/eventnote"
)

// errNamespaceTerminating is a creation refused because the namespace is
// being deleted: nothing to retry or report.
var errNamespaceTerminating = errors.New("namespace is terminating")

// syncFailure is a failed attempt to create or delete pods, reported in the
// ReplicaFailure condition. It is not an error: Reconcile returns its err.
type syncFailure struct {
	reason string // ReasonFailedCreate or ReasonFailedDelete
	err    error
}

// manage creates and deletes pods so that size active pods exist, replaces
// finished ones (with backoff), and rolls out template changes. It returns
// how soon to look again (0: when something changes) and the first kind of
// failure it met, if any.
func (r *PodSetReconciler) manage(ctx context.Context, set *appsv1beta1.PodSet, pods []*corev1.Pod, tmpl corev1.PodTemplateSpec, hash string) (time.Duration, *syncFailure) {
	now := r.Now()
	var active, finished []*corev1.Pod
	for _, p := range pods {
		switch {
		case isActive(p):
			active = append(active, p)
		case p.DeletionTimestamp == nil:
			finished = append(finished, p)
		}
	}
	// A finished pod no longer counts, but its replacement waits for the
	// backoff, so a pod that ends at once is not replaced in a hot loop.
	// Meanwhile it stays, with its logs; once replaced, it is deleted so
	// that ended pods do not pile up, and an Event keeps why it ended.
	held, wait := 0, time.Duration(0)
	if len(finished) > 0 {
		if wait = r.backoff.wait(set.UID, now); wait > 0 {
			held, finished = len(finished), nil
		} else {
			r.backoff.replaced(set.UID, client.ObjectKeyFromObject(set), now)
			for _, p := range finished {
				r.Recorder.Eventf(set, p, corev1.EventTypeWarning, EventFinishedPod, "Replace", "%s", finishedMessage(p))
			}
		}
	}
	creations, doomed := plan(set.Spec, active, held, hash, func(p *corev1.Pod) bool { return isAvailable(p, set.Spec.MinReadySeconds, now) })
	doomed = append(finished, doomed...)
	if creations == 0 && len(doomed) == 0 {
		return wait, nil
	}

	names := make([]string, len(doomed))
	for i, p := range doomed {
		names[i] = p.Name
	}
	newNames := newPodNames(set, creations, r.podName)
	r.expectations.expect(set.UID, client.ObjectKeyFromObject(set), newNames, names)

	if err := r.deletePods(ctx, set, doomed); err != nil {
		return wait, &syncFailure{reason: appsv1beta1.ReasonFailedDelete, err: err}
	}
	failing := meta.IsStatusConditionTrue(set.Status.Conditions, appsv1beta1.ConditionReplicaFailure)
	if err := r.createPods(ctx, set, tmpl, hash, newNames, initialInflight(len(active), failing)); err != nil {
		return wait, &syncFailure{reason: appsv1beta1.ReasonFailedCreate, err: err}
	}
	if creations > 0 {
		r.replacing.Start(client.ObjectKeyFromObject(set), now)
	}
	return wait, nil
}

// createPods creates the named pods (the names the expectations wait for)
// with a slow start from initial in flight, and starts no more once one
// fails.
func (r *PodSetReconciler) createPods(ctx context.Context, set *appsv1beta1.PodSet, tmpl corev1.PodTemplateSpec, hash string, names []string, initial int) error {
	if len(names) == 0 {
		return nil
	}
	key := client.ObjectKeyFromObject(set)
	var (
		mu      sync.Mutex
		next    int
		created []*corev1.Pod
	)
	limit, weight := inflightLimit(&tmpl), creationWeight(&tmpl)
	admit := func() (func(), error) {
		if err := r.creations.Acquire(ctx, weight); err != nil {
			return nil, err
		}
		return func() { r.creations.Release(weight) }, nil
	}
	_, errs := slowStart(len(names), min(initial, limit), limit, admit, func() error {
		mu.Lock()
		name := names[next]
		next++
		mu.Unlock()
		pod, err := r.createPod(ctx, set, tmpl, hash, name)
		if err != nil {
			if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				// The namespace, and this PodSet with it, is going away.
				r.expectations.creationObserved(set.UID, pod.Name)
				return errNamespaceTerminating
			}
			if mayHaveBeenMade(err) {
				// Still expected: the cache shows it, or the next sync
				// learns from the apiserver that it does not exist.
				r.expectations.creationUnsure(set.UID, pod.Name)
			} else {
				// Refused: it will never show.
				r.expectations.creationObserved(set.UID, pod.Name)
			}
			// The apiserver names the pod it refused; with that name the
			// error, and the ReplicaFailure condition quoting it, would
			// change on every attempt.
			return errors.New(withoutGeneratedName(err.Error(), set.Name+"-"))
		}
		podsCreated.WithLabelValues(key.Namespace, key.Name).Inc()
		mu.Lock()
		defer mu.Unlock()
		// Only what the Event names: the pod the apiserver returned is as
		// big as the template, and a round keeps up to createBurst of them.
		created = append(created, &corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
		}})
		return nil
	})
	r.recordRound(set, EventSuccessfulCreate, "Create", "Created", created)
	// Creations never tried (the slow start stopped at a failure) will not
	// show up in the cache: stop waiting for them.
	for _, name := range names[next:] {
		r.expectations.creationObserved(set.UID, name)
	}
	errs = slices.DeleteFunc(errs, func(err error) bool { return errors.Is(err, errNamespaceTerminating) })
	if len(errs) > 0 {
		logf.FromContext(ctx).V(1).Info("creating pods stopped early", "podset", klog.KObj(set), "created", len(created), "wanted", len(names))
		r.Recorder.Eventf(set, nil, corev1.EventTypeWarning, EventFailedCreate, "Create", "Error creating %s: %v", eventnote.Count(len(errs), "pod"), errs[0])
		return fmt.Errorf("creating pods: %w", errors.Join(errs...))
	}
	return nil
}

// nameAttempts is how many names a pod's creation tries before a collision
// is reported: with five random characters after the set's name, two taken
// in a row means something else is making pods of that name.
const nameAttempts = 3

// createPod creates one pod of the set under name, or under a new name when
// that one is taken (the random suffix met an existing pod's: seen at 300
// pods of one set), telling the expectations of the change. A collision is
// the controller's own business, not a failure to show users. It returns
// the pod last tried.
func (r *PodSetReconciler) createPod(ctx context.Context, set *appsv1beta1.PodSet, tmpl corev1.PodTemplateSpec, hash, name string) (*corev1.Pod, error) {
	for attempt := 1; ; attempt++ {
		pod := podFor(set, tmpl, hash, name)
		err := r.Create(ctx, pod)
		if !apierrors.IsAlreadyExists(err) || attempt == nameAttempts {
			return pod, err
		}
		name = r.podName(set)
		r.expectations.renamed(set.UID, pod.Name, name)
	}
}

// deletePods deletes the pods in parallel.
func (r *PodSetReconciler) deletePods(ctx context.Context, set *appsv1beta1.PodSet, pods []*corev1.Pod) error {
	key := client.ObjectKeyFromObject(set)
	var (
		mu      sync.Mutex
		errs    []error
		deleted []*corev1.Pod
		wg      sync.WaitGroup
	)
	for _, pod := range pods {
		wg.Go(func() {
			// The UID precondition keeps a slow delete from removing a
			// different pod that took the same name since.
			err := r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
			if err != nil {
				// Already gone, or failed: nothing will show, stop waiting.
				r.expectations.deletionObserved(set.UID, pod.Name)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				podsDeleted.WithLabelValues(key.Namespace, key.Name).Inc()
				deleted = append(deleted, pod)
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			default:
				errs = append(errs, fmt.Errorf("deleting pod %s: %w", pod.Name, err))
			}
		})
	}
	wg.Wait()
	r.recordRound(set, EventSuccessfulDelete, "Delete", "Deleted", deleted)
	if len(errs) > 0 {
		r.Recorder.Eventf(set, nil, corev1.EventTypeWarning, EventFailedDelete, "Delete", "Error deleting %s: %v", eventnote.Count(len(errs), "pod"), errs[0])
	}
	return errors.Join(errs...)
}

// recordRound records one Event for a round of creations or deletions. An
// Event per pod, as the ReplicaSet controller writes until its recorder's
// spam filter drops them, would be an API write per pod competing with the
// pods' own: a 1,000-pod scale-up writes two Events instead of 1,000.
func (r *PodSetReconciler) recordRound(set *appsv1beta1.PodSet, reason, action, verb string, pods []*corev1.Pod) {
	switch len(pods) {
	case 0:
		return
	case 1:
		r.Recorder.Eventf(set, pods[0], corev1.EventTypeNormal, reason, action, "%s pod: %s", verb, pods[0].Name)
		return
	}
	r.Recorder.Eventf(set, eventnote.First(pods), corev1.EventTypeNormal, reason, action, "%s %d pods: %s", verb, len(pods), eventnote.Names(pods))
}

// mayHaveBeenMade says whether a failed create may still have made its
// object: the apiserver did not answer with a refusal (it timed out, failed
// inside, or the connection broke), so the write may have reached etcd.
// Counting such a pod as never made would create it twice once it shows.
func mayHaveBeenMade(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // no answer: a broken connection, a client timeout
	}
	code := status.Status().Code
	return code >= http.StatusInternalServerError || code == http.StatusGatewayTimeout || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
}

// withoutGeneratedName removes from msg the random suffix the apiserver gave
// a pod named after generateName.
func withoutGeneratedName(msg, generateName string) string {
	return regexp.MustCompile(regexp.QuoteMeta(`"`+generateName)+`[a-z0-9]{5}"`).ReplaceAllString(msg, `"`+generateName+`"`)
}
