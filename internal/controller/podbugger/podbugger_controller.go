// Package podbugger holds the controller of the debug.deckhand.dev kinds:
// PodBugger, which adds an ephemeral debug container to matching pods.
package podbugger

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/incident"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
	"github.com/deckhand-dev/deckhand/internal/pace"
	"github.com/deckhand-dev/deckhand/internal/setupoptions"
	"github.com/deckhand-dev/deckhand/internal/status"
)

// ControllerName is the PodBugger controller's name in --controllers, logs
// and Events.
const ControllerName = "podbugger"

// Event reasons, besides debugv1beta1.ReasonInjectionFailed.
const (
	// EventInjected: the container was added to a pod.
	EventInjected = "Injected"
	// EventTargetContainerNotFound: a pod lacks spec.targetContainerName.
	EventTargetContainerNotFound = "TargetContainerNotFound"
	// EventContainerNameTaken: a pod's own (init) container has the debug
	// container's name.
	EventContainerNameTaken = "ContainerNameTaken"
)

// fieldOwner names Deckhand in the pods' managedFields.
const fieldOwner = "deckhand"

// Setup registers the PodBugger controller: its reconciler, and its
// incident recorder (package incident).
func Setup(mgr ctrl.Manager, opts setupoptions.Options) error {
	p, err := policy.From(opts)
	if err != nil {
		return err
	}
	return errors.Join(
		NewPodBuggerReconciler(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetEventRecorder(ControllerName), p).setupWithManager(mgr),
		incident.Setup(mgr, opts))
}

// PodBuggerReconciler adds each PodBugger's ephemeral container to the
// running pods it selects.
type PodBuggerReconciler struct {
	client.Client
	// APIReader reads pods past the cache before any injection: maxPods
	// counts carriers, and a pod given the container a moment ago may not
	// look like one in the cache yet.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Now       func() time.Time
	// Policy is what the operator allows.
	Policy policy.Policy

	status *status.Writer[debugv1beta1.PodBuggerStatus]
	memory *memory
	passes pace.Passes
}

// NewPodBuggerReconciler returns a reconciler that reads through c (the
// manager's cache) and apiReader (the apiserver itself) and enforces p.
func NewPodBuggerReconciler(c client.Client, apiReader client.Reader, recorder events.EventRecorder, p policy.Policy) *PodBuggerReconciler {
	return &PodBuggerReconciler{
		Client:    c,
		APIReader: apiReader,
		Recorder:  recorder,
		Now:       time.Now,
		Policy:    p,
		status:    status.NewWriter(c, status.ConditionMetrics("PodBugger", func(s *debugv1beta1.PodBuggerStatus) []metav1.Condition { return s.Conditions })),
		memory:    newMemory(),
	}
}

// The controller reads pods and adds ephemeral containers to them; it never
// creates, updates or deletes a pod. It reads namespaces for the opt-in label.
// +kubebuilder:rbac:groups=debug.deckhand.dev,resources=podbuggers,verbs=get;list;watch
// +kubebuilder:rbac:groups=debug.deckhand.dev,resources=podbuggers/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods/ephemeralcontainers,verbs=update
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get

// Reconcile adds pb's container to the running pods it selects that lack it
// (or, with incidents.inject, to the failing pods its records name), keeps
// its PodIncidents within maxRecords and maxAge, drops the logs of those
// whose pod is gone (unless keepLogsAfterPodDeletion), then writes pb's
// status.
func (r *PodBuggerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pb := &debugv1beta1.PodBugger{}
	if err := r.Get(ctx, req.NamespacedName, pb); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !pb.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // nothing to undo: ephemeral containers cannot be removed
	}
	r.passes.Began(req.NamespacedName, r.Now())
	kept, expiry, err := r.pruneIncidents(ctx, pb)
	if err != nil {
		return ctrl.Result{}, err
	}
	o, p, err := r.observe(ctx, pb, failingPods(kept))
	if err != nil {
		return ctrl.Result{}, err
	}
	if o.superseded {
		return ctrl.Result{RequeueAfter: supersededDelay}, nil
	}
	if err := r.dropLogsOfGonePods(ctx, pb, kept, o.pods); err != nil {
		return ctrl.Result{}, err
	}
	result, injectErr := r.inject(ctx, pb, p, &o)
	if expiry > 0 && injectErr == nil && (result.RequeueAfter == 0 || expiry < result.RequeueAfter) {
		result.RequeueAfter = expiry
	}
	want := computeStatus(pb, o)
	if _, err := r.status.Write(ctx, pb, &pb.Status, want); err != nil {
		return ctrl.Result{}, errors.Join(injectErr, fmt.Errorf("writing status of PodBugger %s: %w", req.NamespacedName, err))
	}
	return result, injectErr
}

// supersededDelay is how soon a pass that found its PodBugger changed on
// the apiserver looks again, should the watch not bring the change first.
const supersededDelay = time.Second

// forget drops what the controller holds about a deleted PodBugger.
func (r *PodBuggerReconciler) forget(key types.NamespacedName) {
	r.status.Forget(key)
	r.memory.forget(key)
	r.passes.Forget(key)
	forgetMetrics(key)
}

// observe reads what pb's status and plan depend on: the safety rules it
// breaks and the pods of its namespace. When the plan adds a container, the
// namespace and the pods are read again from the apiserver, not the cache:
// an ephemeral container can never be removed, so no injection may follow an
// opt-out the cache has not seen yet, and a lagging cache hides recent
// carriers (maxPods would be overshot). Passes that add nothing cost no
// extra request.
func (r *PodBuggerReconciler) observe(ctx context.Context, pb *debugv1beta1.PodBugger, failing map[types.UID]bool) (observation, plan, error) {
	selector, err := metav1.LabelSelectorAsSelector(&pb.Spec.Selector)
	if err != nil {
		// The webhook refuses such a selector; without it, retrying won't help.
		return observation{}, plan{}, reconcile.TerminalError(fmt.Errorf("PodBugger %s: spec.selector: %w", client.ObjectKeyFromObject(pb), err))
	}
	nsLabels, pods, err := r.read(ctx, r.Client, pb)
	if err != nil {
		return observation{}, plan{}, err
	}
	o := observation{now: r.Now(), violations: r.Policy.Violations(pb, nsLabels),
		memory: r.memory.of(client.ObjectKeyFromObject(pb), pb.Generation, nsLabels)}
	o.memory.prune(pods)
	p := planFor(pb, selector, pods, o.memory.passOver(o.now), failing, r.Policy)
	if len(p.inject) > 0 && len(o.violations) == 0 {
		if nsLabels, pods, err = r.read(ctx, r.APIReader, pb); err != nil {
			return observation{}, plan{}, err
		}
		o.violations = r.Policy.Violations(pb, nsLabels)
		p = planFor(pb, selector, pods, o.memory.passOver(o.now), failing, r.Policy)
		if len(p.inject) > 0 {
			// Read with the pods, the PodBugger itself: the plan above
			// follows the cache's copy, and an injection it no longer
			// wants (suspended, narrowed, a lower maxPods, deleted) could
			// never be taken back.
			if changed, err := r.changedSince(ctx, pb); err != nil || changed {
				o.superseded = changed
				p.inject, p.spare = nil, nil
				return o, p, err
			}
		}
	}
	o.carriers = carriersOf(p.carriers, policy.ContainerName(pb.Name))
	o.pods = pods
	return o, p, nil
}

// changedSince reports whether the apiserver's pb is no longer the one
// planned with: gone, replaced (another UID), being deleted, or at another
// generation (its spec changed). The next pass plans with the new one, which
// the watch delivers.
func (r *PodBuggerReconciler) changedSince(ctx context.Context, pb *debugv1beta1.PodBugger) (bool, error) {
	fresh := &debugv1beta1.PodBugger{}
	switch err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(pb), fresh); {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading PodBugger %s afresh: %w", client.ObjectKeyFromObject(pb), err)
	}
	return fresh.UID != pb.UID || !fresh.DeletionTimestamp.IsZero() || fresh.Generation != pb.Generation, nil
}

// read returns, through reader, the labels of pb's namespace and its pods.
//
// Read from the cache, the pods share their labels, containers and statuses
// with the cache's own (no copy): a pass over a namespace of 1,000 pods that
// copied each one was most of the manager's CPU while they crash-looped
// (docs/dev-log/performance.md). Nothing changes them: addContainer copies the pod
// it updates.
func (r *PodBuggerReconciler) read(ctx context.Context, reader client.Reader, pb *debugv1beta1.PodBugger) (map[string]string, []corev1.Pod, error) {
	ns := &corev1.Namespace{}
	if err := reader.Get(ctx, client.ObjectKey{Name: pb.Namespace}, ns); err != nil {
		return nil, nil, fmt.Errorf("reading namespace of PodBugger %s: %w", client.ObjectKeyFromObject(pb), err)
	}
	pods := &corev1.PodList{}
	if err := reader.List(ctx, pods, client.InNamespace(pb.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("listing pods for PodBugger %s: %w", client.ObjectKeyFromObject(pb), err)
	}
	return ns.Labels, pods.Items, nil
}

// setupWithManager watches PodBuggers, the pods of their namespaces, the
// namespaces' labels and the creation of PodIncidents (a new record may
// exceed maxRecords, or name a pod to inject into: incidentEventHandler).
func (r *PodBuggerReconciler) setupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&debugv1beta1.PodBugger{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, r.status.WrittenByOthers()))).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.podBuggersInNamespaceOf),
			builder.WithPredicates(podChanged)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.podBuggersIn),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&debugv1beta1.PodIncident{}, r.incidentEventHandler()).
		Complete(r)
}

// incidentEventHandler queues a record's PodBugger when the record is
// created: one more record may exceed maxRecords, or name a pod to inject
// into. Pods failing together create records by the dozen a second (1,000
// crash-looping pods, 33 a second), and each pass lists the namespace's pods
// and the PodBugger's records: a pass per record was most of the manager's
// CPU there (docs/dev-log/performance.md). So the first record after a quiet spell
// is acted on at once, and those created within pruneInterval of a pass's
// start wait for the window's end, all in one pass: records beyond
// maxRecords live up to a second longer, which no reader notices, and an
// injection a record asks for waits as long only while records keep coming.
// A record's update or deletion (pruned by the pass itself, or by hand) asks
// for nothing: it adds no record and names no pod to inject into.
func (r *PodBuggerReconciler) incidentEventHandler() handler.Funcs {
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			ref := metav1.GetControllerOfNoCopy(e.Object)
			if ref == nil || ref.Kind != "PodBugger" {
				return
			}
			if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != debugv1beta1.GroupVersion.Group {
				return
			}
			key := types.NamespacedName{Namespace: e.Object.GetNamespace(), Name: ref.Name}
			if wait := r.passes.Wait(key, r.Now(), pruneInterval); wait > 0 {
				q.AddAfter(reconcile.Request{NamespacedName: key}, wait)
				return
			}
			q.Add(reconcile.Request{NamespacedName: key})
		},
	}
}

// pruneInterval is how far apart the passes that new records ask for are.
const pruneInterval = time.Second

// podBuggersInNamespaceOf maps a pod to every PodBugger of its namespace.
// There are few of those, and a pod that stops matching may still carry a
// container a PodBugger counts.
func (r *PodBuggerReconciler) podBuggersInNamespaceOf(ctx context.Context, pod client.Object) []reconcile.Request {
	return r.requestsForNamespace(ctx, pod.GetNamespace())
}

// podBuggersIn maps a namespace to its PodBuggers.
func (r *PodBuggerReconciler) podBuggersIn(ctx context.Context, ns client.Object) []reconcile.Request {
	return r.requestsForNamespace(ctx, ns.GetName())
}

// requestsForNamespace is a request for each PodBugger of namespace.
func (r *PodBuggerReconciler) requestsForNamespace(ctx context.Context, namespace string) []reconcile.Request {
	list := &debugv1beta1.PodBuggerList{}
	if err := r.List(ctx, list, client.InNamespace(namespace)); err != nil {
		logf.FromContext(ctx).Error(err, "listing PodBuggers", "namespace", namespace)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, pb := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pb)})
	}
	return reqs
}

// podChanged passes the pod events a PodBugger cares about: creation,
// deletion, and updates of labels, phase, deletion, ephemeral containers or
// their statuses. Other status churn (conditions, probes) is dropped.
var podChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		oldPod, okOld := e.ObjectOld.(*corev1.Pod)
		newPod, okNew := e.ObjectNew.(*corev1.Pod)
		if !okOld || !okNew {
			return true
		}
		return oldPod.Status.Phase != newPod.Status.Phase ||
			!equality.Semantic.DeepEqual(oldPod.Labels, newPod.Labels) ||
			len(oldPod.Spec.EphemeralContainers) != len(newPod.Spec.EphemeralContainers) ||
			(oldPod.DeletionTimestamp == nil) != (newPod.DeletionTimestamp == nil) ||
			!equality.Semantic.DeepEqual(oldPod.Status.EphemeralContainerStatuses, newPod.Status.EphemeralContainerStatuses)
	},
}
