// Package apps holds the controllers of the apps.deckhand.dev API group.
package apps

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	appsv1alpha1 "github.com/deckhand-dev/deckhand/api/apps/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/setup"
)

// ControllerName names the PodSet controller in --controllers, logs, metrics
// and as the reporting controller of its Events.
const ControllerName = "podset"

// podOwnerIndex indexes pods by the UID of the PodSet that controls them.
const podOwnerIndex = ".metadata.podSetControllerUID"

// Event reasons, as the ReplicaSet controller names them.
const (
	eventSuccessfulCreate = "SuccessfulCreate"
	eventFailedCreate     = "FailedCreate"
	eventSuccessfulDelete = "SuccessfulDelete"
	eventFailedDelete     = "FailedDelete"
)

// errNamespaceTerminating is a creation refused because the namespace is
// being deleted: nothing to retry or report.
var errNamespaceTerminating = errors.New("namespace is terminating")

// PodSetReconciler keeps each PodSet's pods at spec.size, made from its
// current template.
type PodSetReconciler struct {
	// Client writes to the apiserver and reads from the manager's cache.
	Client   client.Client
	Recorder recorder.EventRecorder
	// Now is the clock for condition transition times and expectations.
	Now func() time.Time

	expectations *expectations
}

// NewPodSetReconciler returns a reconciler that reads and writes through c.
func NewPodSetReconciler(c client.Client, rec recorder.EventRecorder) *PodSetReconciler {
	return &PodSetReconciler{Client: c, Recorder: rec, Now: time.Now, expectations: newExpectations(time.Now)}
}

// Setup registers the PodSet controller with the manager.
func Setup(mgr ctrl.Manager, _ setup.Options) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, podOwnerIndex, func(o client.Object) []string {
		if ref := podSetRef(o); ref != nil {
			return []string{string(ref.UID)}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing pods by their PodSet: %w", err)
	}
	r := NewPodSetReconciler(mgr.GetClient(), mgr.GetEventRecorder(ControllerName))
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		// Not woken by its own status writes: only spec, label and
		// annotation changes (and creations and deletions) matter.
		For(&appsv1alpha1.PodSet{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{},
			predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&corev1.Pod{}, r.podEventHandler()).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
}

// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=podsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=podsets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=podsets/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete

// Reconcile brings one PodSet's pods to its spec and reports what it sees.
func (r *PodSetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	set := &appsv1alpha1.PodSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, set); err != nil {
		if apierrors.IsNotFound(err) {
			r.expectations.forget(req.NamespacedName)
			forgetMetrics(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("getting PodSet: %w", err)
	}
	if set.DeletionTimestamp != nil {
		// The garbage collector removes the pods; creating more now would
		// only race it.
		return ctrl.Result{}, nil
	}

	pods, err := r.podsOf(ctx, set)
	if err != nil {
		return ctrl.Result{}, err
	}
	tmpl := templateOf(set)
	hash := templateHash(tmpl)

	// While the cache has not shown this PodSet's last creations and
	// deletions, what it shows is stale: act on it and pods would be
	// created twice. Only report status until it has caught up.
	synced := r.expectations.satisfied(set.UID)
	var failure *syncError
	if synced {
		failure = r.manage(ctx, set, pods, tmpl, hash)
	}

	status := calculateStatus(set, pods, hash, synced, failure, metav1.NewTime(r.Now()))
	var manageErr error // a nil *syncError is not a nil error
	if failure != nil {
		manageErr = failure
	}
	if err := r.writeStatus(ctx, set, status); err != nil {
		if apierrors.IsConflict(err) && manageErr == nil {
			// The cache is behind: try again once it caught up (its own
			// status writes do not wake this controller).
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		return ctrl.Result{}, errors.Join(err, manageErr)
	}
	if manageErr != nil {
		// Retried with backoff: a quota or webhook may let pods in later.
		return ctrl.Result{}, manageErr
	}
	if !synced {
		// Pod events end the wait; this bounds it if one was lost.
		return ctrl.Result{RequeueAfter: expectationsTTL}, nil
	}
	return ctrl.Result{}, nil
}

// podsOf lists the pods the set controls, in any state. Pods are matched by
// the controller's UID, not by name or labels: pods of an earlier PodSet
// with the same name are not this one's.
func (r *PodSetReconciler) podsOf(ctx context.Context, set *appsv1alpha1.PodSet) ([]*corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := r.Client.List(ctx, list, client.InNamespace(set.Namespace), client.MatchingFields{podOwnerIndex: string(set.UID)}); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	pods := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		if ref := podSetRef(&list.Items[i]); ref != nil && ref.UID == set.UID {
			pods = append(pods, &list.Items[i])
		}
	}
	return pods, nil
}

// manage creates and deletes pods so that size active pods exist, replaces
// finished ones, and rolls out template changes. It returns the first kind of
// failure it met, if any.
func (r *PodSetReconciler) manage(ctx context.Context, set *appsv1alpha1.PodSet, pods []*corev1.Pod, tmpl corev1.PodTemplateSpec, hash string) *syncError {
	var active, doomed []*corev1.Pod
	for _, p := range pods {
		switch {
		case isActive(p):
			active = append(active, p)
		case p.DeletionTimestamp == nil:
			// Finished: it no longer counts, so a replacement is created
			// below, and it is removed so that ended pods do not pile up
			// (the SuccessfulDelete Event names it).
			doomed = append(doomed, p)
		}
	}

	size := int(set.Spec.Size)
	creations := 0
	switch diff := len(active) - size; {
	case diff < 0:
		creations = min(-diff, burstLimit)
	case diff > 0:
		doomed = append(doomed, deletionOrder(active, hash)[:min(diff, burstLimit)]...)
	case set.Spec.UpdateStrategy.Type != appsv1alpha1.OnDeleteStrategy:
		doomed = append(doomed, rolloutVictims(active, hash, set.Spec.Size, maxUnavailable(set.Spec.UpdateStrategy, set.Spec.Size))...)
	}
	if creations == 0 && len(doomed) == 0 {
		return nil
	}

	names := make([]string, len(doomed))
	for i, p := range doomed {
		names[i] = p.Name
	}
	r.expectations.expect(set.UID, client.ObjectKeyFromObject(set), creations, names)

	var failures []*syncError
	if err := r.deletePods(ctx, set, doomed); err != nil {
		failures = append(failures, &syncError{reason: appsv1alpha1.ReasonFailedDelete, err: err})
	}
	if err := r.createPods(ctx, set, tmpl, hash, creations); err != nil {
		failures = append(failures, &syncError{reason: appsv1alpha1.ReasonFailedCreate, err: err})
	}
	if len(failures) == 0 {
		return nil
	}
	return failures[0]
}

// createPods creates n pods in slow-start batches, and stops at the first
// batch that fails.
func (r *PodSetReconciler) createPods(ctx context.Context, set *appsv1alpha1.PodSet, tmpl corev1.PodTemplateSpec, hash string, n int) error {
	if n == 0 {
		return nil
	}
	key := client.ObjectKeyFromObject(set)
	created, errs := slowStartBatch(n, func() error {
		pod := podFor(set, tmpl, hash)
		if err := r.Client.Create(ctx, pod); err != nil {
			if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				// The namespace, and this PodSet with it, is going away.
				return errNamespaceTerminating
			}
			// The apiserver names the pod it refused; with that name the
			// error, and the ReplicaFailure condition quoting it, would
			// change on every attempt.
			err = errors.New(withoutGeneratedName(err.Error(), pod.GenerateName))
			r.Recorder.Eventf(set, nil, corev1.EventTypeWarning, eventFailedCreate, "Create", "Error creating: %v", err)
			return err
		}
		r.Recorder.Eventf(set, pod, corev1.EventTypeNormal, eventSuccessfulCreate, "Create", "Created pod: %s", pod.Name)
		podsCreated.WithLabelValues(key.Namespace, key.Name).Inc()
		return nil
	})
	// Creations that failed, or were never tried, will not show up in the
	// cache: stop waiting for them.
	for range n - created {
		r.expectations.creationObserved(set.UID)
	}
	errs = slices.DeleteFunc(errs, func(err error) bool { return errors.Is(err, errNamespaceTerminating) })
	if len(errs) > 0 {
		log.FromContext(ctx).V(1).Info("creating pods stopped early", "podset", klog.KObj(set), "created", created, "wanted", n)
		return fmt.Errorf("creating pods: %w", errors.Join(errs...))
	}
	return nil
}

// deletePods deletes the pods in parallel.
func (r *PodSetReconciler) deletePods(ctx context.Context, set *appsv1alpha1.PodSet, pods []*corev1.Pod) error {
	key := client.ObjectKeyFromObject(set)
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, pod := range pods {
		wg.Go(func() {
			// The UID precondition keeps a slow delete from removing a
			// different pod that took the same name since.
			err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
			switch {
			case err == nil:
				r.Recorder.Eventf(set, pod, corev1.EventTypeNormal, eventSuccessfulDelete, "Delete", "Deleted pod: %s", pod.Name)
				podsDeleted.WithLabelValues(key.Namespace, key.Name).Inc()
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
				// Already gone: nothing will show, stop waiting.
				r.expectations.deletionObserved(set.UID, pod.Name)
			default:
				r.expectations.deletionObserved(set.UID, pod.Name)
				r.Recorder.Eventf(set, pod, corev1.EventTypeWarning, eventFailedDelete, "Delete", "Error deleting: %v", err)
				mu.Lock()
				errs = append(errs, fmt.Errorf("deleting pod %s: %w", pod.Name, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// writeStatus patches the status when it changed, and only then: a write
// that changes nothing would wake this controller again for nothing.
func (r *PodSetReconciler) writeStatus(ctx context.Context, set *appsv1alpha1.PodSet, status appsv1alpha1.PodSetStatus) error {
	if equality.Semantic.DeepEqual(set.Status, status) {
		return nil
	}
	// The lock makes a patch computed against a stale copy fail instead of
	// leaving fields the stale copy happened to share with the new status.
	patch := client.MergeFromWithOptions(set.DeepCopy(), client.MergeFromWithOptimisticLock{})
	set.Status = status
	if err := r.Client.Status().Patch(ctx, set, patch); err != nil {
		return fmt.Errorf("writing status: %w", err)
	}
	return nil
}

// podEventHandler tells the expectations what the cache now shows, and
// queues the pod's PodSet.
func (r *PodSetReconciler) podEventHandler() handler.Funcs {
	enqueue := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], pod client.Object, ref *metav1.OwnerReference) {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: pod.GetNamespace(), Name: ref.Name}})
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			ref := podSetRef(e.Object)
			if ref == nil {
				return
			}
			if e.Object.GetDeletionTimestamp() != nil {
				// Seen for the first time already on its way out (a
				// restart of the manager): it counts as a deletion.
				r.expectations.deletionObserved(ref.UID, e.Object.GetName())
			} else {
				r.expectations.creationObserved(ref.UID)
			}
			enqueue(q, e.Object, ref)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if old := podSetRef(e.ObjectOld); old != nil {
				// Released by its PodSet (its owner reference edited away):
				// that PodSet is one pod short now.
				if cur := podSetRef(e.ObjectNew); cur == nil || cur.UID != old.UID {
					enqueue(q, e.ObjectOld, old)
				}
			}
			ref := podSetRef(e.ObjectNew)
			if ref == nil {
				return
			}
			if e.ObjectNew.GetDeletionTimestamp() != nil {
				// A pod marked for deletion is as good as gone: the
				// ReplicaSet controller counts it the same way.
				r.expectations.deletionObserved(ref.UID, e.ObjectNew.GetName())
			}
			enqueue(q, e.ObjectNew, ref)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			ref := podSetRef(e.Object)
			if ref == nil {
				return
			}
			r.expectations.deletionObserved(ref.UID, e.Object.GetName())
			enqueue(q, e.Object, ref)
		},
	}
}

// podSetRef returns the owner reference of the PodSet controlling o, if any.
func podSetRef(o metav1.Object) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(o)
	if ref == nil || ref.Kind != "PodSet" || ref.APIVersion != appsv1alpha1.GroupVersion.String() {
		return nil
	}
	return ref
}

// withoutGeneratedName removes from msg the random suffix the apiserver gave
// a pod named after generateName.
func withoutGeneratedName(msg, generateName string) string {
	return regexp.MustCompile(regexp.QuoteMeta(`"`+generateName)+`[a-z0-9]{5}"`).ReplaceAllString(msg, `"`+generateName+`"`)
}
