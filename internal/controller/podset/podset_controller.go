// Package podset holds the controllers of the apps.deckhand.dev API group.
package podset

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"golang.org/x/sync/semaphore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/pace"
	"github.com/deckhand-dev/deckhand/internal/setupoptions"
	"github.com/deckhand-dev/deckhand/internal/status"
)

// ControllerName names the PodSet controller in --controllers, logs, metrics
// and as the reporting controller of its Events.
const ControllerName = "podset"

// Pod indexes of the manager's cache. podOwnerIndex indexes pods by the UID
// of the PodSet that controls them; podOrphanIndex indexes pods that have no
// controller by the PodSet their labels select, so that finding orphans to
// adopt reads only orphans, not every pod the set already has.
const (
	podOwnerIndex  = ".metadata.podSetControllerUID"
	podOrphanIndex = ".metadata.podSetOrphanOf"
)

// Event reasons on a PodSet, as the ReplicaSet controller names them.
const (
	// EventSuccessfulCreate: pods were created (one Event per round, naming them).
	EventSuccessfulCreate = "SuccessfulCreate"
	// EventFailedCreate: creating pods failed (Warning, the first error).
	EventFailedCreate = "FailedCreate"
	// EventSuccessfulDelete: pods were deleted (one Event per round, naming them).
	EventSuccessfulDelete = "SuccessfulDelete"
	// EventFailedDelete: deleting pods failed (Warning, the first error).
	EventFailedDelete = "FailedDelete"
	// EventFinishedPod says why a pod ended (phase, reason, each
	// container's exit code), when the PodSet replaces and deletes it.
	EventFinishedPod = "FinishedPod"
)

// workers is how many PodSets are synced at once. Each sync waits on the
// apiserver (a pod created, a status written: tens of milliseconds under
// load), not on the manager's CPU (under a millisecond), so a failover
// that queues every PodSet is worked through as fast as syncs overlap:
// with four workers, 1,000 PodSets whose pods were back in 22 s had their
// statuses current 16 s later, the queue working through two syncs a set
// at ~55 a second (make bench, scale-podset; docs/dev-log/performance.md). What
// more syncs at once could cost the manager, their creations in flight,
// is bounded across the workers (creationBudget), not per sync.
const workers = 16

// PodSetReconciler keeps each PodSet's pods at spec.size, made from its
// current template.
type PodSetReconciler struct {
	// Client writes to the apiserver and reads from the manager's cache.
	client.Client
	// APIReader reads past the cache: a PodSet is checked afresh before it
	// adopts pods.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Now is the clock for condition transition times and expectations.
	Now func() time.Time

	status       *status.Writer[appsv1beta1.PodSetStatus]
	podName      func(*appsv1beta1.PodSet) string // newPodName; tests choose names that collide
	expectations *expectations
	backoff      *finishedBackoff
	syncs        pace.Passes
	// creations is creationBudget, shared by the workers' creations in
	// flight.
	creations *semaphore.Weighted
	replacing pace.Holds // a replacement's first status (heldBack)
}

// NewPodSetReconciler returns a reconciler that writes through c, reads
// through c's cache and, before it adopts pods, apiReader.
func NewPodSetReconciler(c client.Client, apiReader client.Reader, rec events.EventRecorder) *PodSetReconciler {
	r := &PodSetReconciler{
		Client:    c,
		APIReader: apiReader,
		Recorder:  rec,
		Now:       time.Now,
		backoff:   newFinishedBackoff(),
		podName:   newPodName,
		creations: semaphore.NewWeighted(creationBudget),
	}
	clock := func() time.Time { return r.Now() }
	r.status = status.NewWriter(c,
		status.ConditionMetrics("PodSet", func(s *appsv1beta1.PodSetStatus) []metav1.Condition { return s.Conditions }),
		status.Paced(statusInterval, clock, urgentStatus))
	r.expectations = newExpectations(clock)
	return r
}

// Setup registers the PodSet controller with the manager.
func Setup(mgr ctrl.Manager, _ setupoptions.Options) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, podOwnerIndex, func(o client.Object) []string {
		if ref := appsv1beta1.ControllerRef(o); ref != nil {
			return []string{string(ref.UID)}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing pods by their PodSet: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, podOrphanIndex, func(o client.Object) []string {
		if name, ok := o.GetLabels()[appsv1beta1.PodSetLabel]; ok && metav1.GetControllerOfNoCopy(o) == nil {
			return []string{name}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing orphan pods by the PodSet they match: %w", err)
	}
	r := NewPodSetReconciler(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetEventRecorder(ControllerName))
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		// Not woken by its own status writes: only spec, label and
		// annotation changes (and creations and deletions) matter, and a
		// status someone else wrote.
		For(&appsv1beta1.PodSet{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{},
			predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}, r.status.WrittenByOthers()))).
		Watches(&corev1.Pod{}, r.podEventHandler()).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=podsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=podsets/status,verbs=get;patch
// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=podsets/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete;patch

// Reconcile brings one PodSet's pods to its spec and reports what it sees.
//
// A PodSet being deleted is left alone: the garbage collector removes its
// pods, and creating more would only race it.
//
// While the cache has not shown this PodSet's last creations and deletions
// (its expectations are not satisfied), what it shows is stale: act on it
// and pods would be created twice, report it and status would go back in
// time. Until it catches up (a few pod events; expectationsTTL bounds the
// wait if one was lost) only a new spec generation is acknowledged. Without
// this early return each pod event of a 1,000-pod scale-up would list and
// judge every pod again. It is checked before the list, as the ReplicaSet
// controller does: checked after, an event handled in between would let an
// older list pass as synced. Pods whose creation ended without an answer
// are settled first (settleUnsure).
func (r *PodSetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	set := &appsv1beta1.PodSet{}
	if err := r.Get(ctx, req.NamespacedName, set); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("getting PodSet %s: %w", req.NamespacedName, err)
	}
	if set.DeletionTimestamp != nil {
		return ctrl.Result{}, nil // the garbage collector removes the pods
	}
	r.syncs.Began(req.NamespacedName, r.Now())
	if err := r.settleUnsure(ctx, set); err != nil {
		return ctrl.Result{}, err
	}
	synced := r.expectations.satisfied(set.UID)
	if !synced && set.Status.ObservedGeneration == set.Generation { // the cache is behind our own writes
		return ctrl.Result{RequeueAfter: expectationsTTL}, nil
	}
	pods, err := r.podsOf(ctx, set)
	if err != nil {
		return ctrl.Result{}, err
	}
	if pods, err = r.claimPods(ctx, set, pods); err != nil {
		return ctrl.Result{}, err
	}
	tmpl := templateOf(set)
	hash := templateHash(tmpl)
	relabelLegacyHash(pods, tmpl, hash)
	var failure *syncFailure
	requeue := expectationsTTL // pod events end the wait; this bounds it if one was lost
	if synced {
		requeue, failure = r.manage(ctx, set, pods, tmpl, hash)
	}
	now := r.Now()
	want := computeStatus(set, pods, hash, synced, failure, metav1.NewTime(now))
	if wait := r.replacing.Wait(req.NamespacedName, now, statusInterval, heldBack(set.Spec.Replicas, &set.Status, &want)); wait > 0 {
		return resultOf(failure, requeue, untilAvailable(pods, set.Spec.MinReadySeconds, now), wait)
	}
	wait, err := r.status.Write(ctx, set, &set.Status, want)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("writing status of PodSet %s: %w", req.NamespacedName, err)
	}
	return resultOf(failure, requeue, untilAvailable(pods, set.Spec.MinReadySeconds, now), wait)
}

// settleUnsure asks the apiserver about the pods whose creation failed
// without saying whether it made them (a timeout, a connection cut while
// etcd restarted): one it does not have will never show, and stops being
// waited for; one it has stays expected until the cache shows it. Counting
// them as never made, as the ReplicaSet controller does, makes extra pods
// when they show up.
func (r *PodSetReconciler) settleUnsure(ctx context.Context, set *appsv1beta1.PodSet) error {
	for _, name := range r.expectations.unsure(set.UID) {
		key := client.ObjectKey{Namespace: set.Namespace, Name: name}
		if r.Get(ctx, key, &corev1.Pod{}) == nil {
			// The cache shows it: its creation is observed, or about to be.
			r.expectations.dropUnsure(set.UID, name)
			continue
		}
		switch err := r.APIReader.Get(ctx, key, &corev1.Pod{}); {
		case apierrors.IsNotFound(err):
			// Never made, as far as the apiserver knows: stop waiting. If
			// the create still commits, its pod shows up as one the set
			// has, and is not counted against a later round's creations
			// (expectations are kept by name).
			r.expectations.creationObserved(set.UID, name)
		case err != nil:
			return fmt.Errorf("checking whether pod %s was created: %w", key, err)
		}
	}
	return nil
}

// resultOf says when to look at a PodSet again after a sync: at the
// earliest of the positive delays, or with the workqueue's backoff after a
// failure (a quota or webhook may let pods in later).
func resultOf(failure *syncFailure, delays ...time.Duration) (ctrl.Result, error) {
	if failure != nil {
		return ctrl.Result{}, failure.err
	}
	var next time.Duration
	for _, d := range delays {
		if d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

// forget drops what the controller keeps for a PodSet that is gone.
func (r *PodSetReconciler) forget(key types.NamespacedName) {
	r.expectations.forget(key)
	r.replacing.Forget(key)
	r.backoff.forget(key)
	r.syncs.Forget(key)
	r.status.Forget(key)
	forgetMetrics(key)
}

// podsOf lists the pods the set controls, in any state. Pods are matched by
// the controller's UID, not by name or labels: pods of an earlier PodSet
// with the same name are not this one's.
//
// The pods are the cache's own, not copies: copying a thousand pods on every
// sync of a scale-up kept a core busy. Copy a pod before changing it.
func (r *PodSetReconciler) podsOf(ctx context.Context, set *appsv1beta1.PodSet) ([]*corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := r.List(ctx, list, client.InNamespace(set.Namespace), client.MatchingFields{podOwnerIndex: string(set.UID)}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing pods of PodSet %s: %w", client.ObjectKeyFromObject(set), err)
	}
	pods := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		if ref := appsv1beta1.ControllerRef(&list.Items[i]); ref != nil && ref.UID == set.UID {
			pods = append(pods, &list.Items[i])
		}
	}
	return pods, nil
}

// podEventHandler tells the expectations what the cache now shows, and
// queues the pod's PodSet.
//
// It is a handler.Funcs so that a pod of the informer's initial list (a
// start, a failover) queues its PodSet at low priority, as
// controller-runtime's handler.Funcs does on a priority queue: a PodSet
// changed since (scaled) is worked on first, not behind every PodSet the
// initial list queued (controller-runtime#3496;
// TestInitialListDoesNotDelayAFreshChange).
func (r *PodSetReconciler) podEventHandler() handler.Funcs {
	enqueue := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], pod client.Object, ref *metav1.OwnerReference) {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: pod.GetNamespace(), Name: ref.Name}})
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			ref := appsv1beta1.ControllerRef(e.Object)
			if ref == nil {
				enqueueAdopter(q, e.Object)
				return
			}
			if e.Object.GetDeletionTimestamp() != nil {
				// Seen for the first time already on its way out (a
				// restart of the manager): it counts as a deletion.
				r.expectations.deletionObserved(ref.UID, e.Object.GetName())
			} else {
				r.expectations.creationObserved(ref.UID, e.Object.GetName())
			}
			enqueue(q, e.Object, ref)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if old := appsv1beta1.ControllerRef(e.ObjectOld); old != nil {
				// Released by its PodSet (its owner reference edited away):
				// that PodSet is one pod short now.
				if cur := appsv1beta1.ControllerRef(e.ObjectNew); cur == nil || cur.UID != old.UID {
					enqueue(q, e.ObjectOld, old)
				}
			}
			ref := appsv1beta1.ControllerRef(e.ObjectNew)
			if ref == nil {
				enqueueAdopter(q, e.ObjectNew)
				return
			}
			if e.ObjectNew.GetDeletionTimestamp() != nil {
				// A pod marked for deletion is as good as gone: the
				// ReplicaSet controller counts it the same way.
				r.expectations.deletionObserved(ref.UID, e.ObjectNew.GetName())
			}
			if progressOnly(e.ObjectOld, e.ObjectNew) {
				// Scheduled, started, ready: a thousand starting pods send
				// thousands of these, and each would be a sync of the whole
				// set. Gathered, they make a few; news after a quiet spell
				// (the pod that completes a set) is acted on at once.
				key := types.NamespacedName{Namespace: e.ObjectNew.GetNamespace(), Name: ref.Name}
				if wait := progressWait(r.syncs.Last(key), r.Now()); wait > 0 {
					q.AddAfter(reconcile.Request{NamespacedName: key}, wait)
					return
				}
			}
			enqueue(q, e.ObjectNew, ref)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			ref := appsv1beta1.ControllerRef(e.Object)
			if ref == nil {
				return
			}
			r.expectations.deletionObserved(ref.UID, e.Object.GetName())
			enqueue(q, e.Object, ref)
		},
	}
}

// progressDelay is how far apart the syncs of a PodSet that its pods'
// progress (progressOnly) asks for are: the progress of many pods is
// handled in one sync.
const progressDelay = 250 * time.Millisecond

// progressWait is how long the sync that a pod's progress asks for waits, at
// now, for a PodSet whose last sync began at last: the rest of progressDelay
// since then, or nothing once it has passed. The first news after a quiet
// spell is acted on at once (the last pod of a set becoming ready, whose
// status a user waits for); what follows it within progressDelay is gathered
// into one sync at the window's end. A fixed delay after every event held
// each set's last status 250 ms behind its pods.
func progressWait(last, now time.Time) time.Duration {
	return max(0, last.Add(progressDelay).Sub(now))
}

// progressOnly says whether an update of a pod its PodSet still controls
// only moves it along its way (scheduled, started, ready), which changes the
// set's counts and nothing it must act on at once: the pod is not being
// deleted, has not finished (it would be replaced), and its labels (the
// selector, the template hash) and owners are as they were.
func progressOnly(old, cur client.Object) bool {
	oldPod, ok1 := old.(*corev1.Pod)
	pod, ok2 := cur.(*corev1.Pod)
	return ok1 && ok2 && pod.DeletionTimestamp == nil && !isFinished(pod) &&
		maps.Equal(oldPod.Labels, pod.Labels) &&
		slices.EqualFunc(oldPod.OwnerReferences, pod.OwnerReferences, func(a, b metav1.OwnerReference) bool {
			return a.UID == b.UID && ptr.Deref(a.Controller, false) == ptr.Deref(b.Controller, false)
		})
}

// enqueueAdopter queues the PodSet that would adopt pod, an orphan that
// carries a PodSet's label.
func enqueueAdopter(q workqueue.TypedRateLimitingInterface[reconcile.Request], pod client.Object) {
	name := pod.GetLabels()[appsv1beta1.PodSetLabel]
	if name == "" || metav1.GetControllerOfNoCopy(pod) != nil || pod.GetDeletionTimestamp() != nil {
		return
	}
	q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: pod.GetNamespace(), Name: name}})
}
