// Package debug holds the controller of the debug.deckhand.dev kinds:
// PodBugger, which adds an ephemeral debug container to matching pods.
package debug

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	debugv1alpha1 "github.com/deckhand-dev/deckhand/api/debug/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/setup"
	debugwebhook "github.com/deckhand-dev/deckhand/internal/webhook/debug/v1alpha1"
)

// ControllerName is the PodBugger controller's name in --controllers, logs
// and Events.
const ControllerName = "podbugger"

// fieldOwner names Deckhand in the pods' managedFields.
const fieldOwner = "deckhand"

// Setup registers the PodBugger controller.
func Setup(mgr ctrl.Manager, opts setup.Options) error {
	policy, err := debugwebhook.PolicyFrom(opts)
	if err != nil {
		return err
	}
	r := &PodBuggerReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder(ControllerName),
		Policy:    policy,
	}
	return r.SetupWithManager(mgr)
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
	Policy    debugwebhook.Policy
}

// The controller reads pods and adds ephemeral containers to them; it never
// creates, updates or deletes a pod. It reads namespaces for the opt-in label.
// +kubebuilder:rbac:groups=debug.deckhand.dev,resources=podbuggers,verbs=get;list;watch
// +kubebuilder:rbac:groups=debug.deckhand.dev,resources=podbuggers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods/ephemeralcontainers,verbs=update;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Reconcile adds pb's container to the running pods it selects that lack it,
// then writes pb's status.
func (r *PodBuggerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pb := &debugv1alpha1.PodBugger{}
	if err := r.Get(ctx, req.NamespacedName, pb); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !pb.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // nothing to undo: ephemeral containers cannot be removed
	}

	ns := &corev1.Namespace{}
	if err := r.Get(ctx, client.ObjectKey{Name: pb.Namespace}, ns); err != nil {
		return ctrl.Result{}, fmt.Errorf("reading namespace of PodBugger %s: %w", req, err)
	}
	selector, err := metav1.LabelSelectorAsSelector(&pb.Spec.Selector)
	if err != nil {
		// The webhook refuses such a selector; without it, retrying won't help.
		return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("PodBugger %s: spec.selector: %w", req, err))
	}
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(pb.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing pods for PodBugger %s: %w", req, err)
	}

	o := observation{
		carriers:   map[types.UID]carrier{},
		violations: r.Policy.Check(pb, ns.Labels),
		now:        time.Now(),
	}
	p := planFor(pb, selector, pods.Items)
	if len(p.inject) > 0 && len(o.violations) == 0 {
		// An ephemeral container can never be removed, so the plan that adds
		// one is made on what the apiserver holds now, not on the cache:
		// otherwise a lagging cache hides recent carriers and maxPods is
		// overshot. Passes with nothing to add cost no extra request.
		if err := r.APIReader.List(ctx, pods, client.InNamespace(pb.Namespace)); err != nil {
			return ctrl.Result{}, fmt.Errorf("listing pods for PodBugger %s: %w", req, err)
		}
		p = planFor(pb, selector, pods.Items)
	}
	for _, pod := range p.carriers {
		o.carriers[pod.UID] = carrier{name: pod.Name}
	}
	var result ctrl.Result
	var injectErrs []error
	if len(o.violations) == 0 {
		result, injectErrs = r.inject(ctx, pb, p, o.carriers)
		o.injectErr = errors.Join(injectErrs...)
	}

	status := computeStatus(pb, o)
	if !equality.Semantic.DeepEqual(status, pb.Status) {
		patch := client.MergeFrom(pb.DeepCopy())
		pb.Status = status
		if err := r.Status().Patch(ctx, pb, patch); err != nil {
			return ctrl.Result{}, errors.Join(o.injectErr, fmt.Errorf("writing status of PodBugger %s: %w", req, err))
		}
	}
	switch {
	case o.injectErr == nil:
		return result, nil
	case slices.ContainsFunc(injectErrs, func(err error) bool { return !refused(err) }):
		return ctrl.Result{}, o.injectErr // the rate limiter retries with backoff
	case result.RequeueAfter > 0:
		// Only refusals, which status and Events report, and a pod to look
		// at again: an error would discard the requeue.
		return result, nil
	default:
		return ctrl.Result{}, reconcile.TerminalError(o.injectErr)
	}
}

// inject adds pb's container to the pods the plan names, records them in
// carriers, and tells about skipped pods with Events. A pod that changed
// since the cache saw it is retried shortly; other failures are returned,
// one per pod.
func (r *PodBuggerReconciler) inject(ctx context.Context, pb *debugv1alpha1.PodBugger, p plan, carriers map[types.UID]carrier) (ctrl.Result, []error) {
	logger := log.FromContext(ctx)
	for _, s := range p.skipped {
		r.Recorder.Eventf(pb, s.pod, corev1.EventTypeWarning, s.reason, "SkipPod", "Pod %s skipped: %s", s.pod.Name, s.note)
		injections.WithLabelValues(pb.Namespace, resultSkipped).Inc()
	}
	var result ctrl.Result
	var errs []error
	for _, pod := range p.inject {
		err := r.addContainer(ctx, pod, debugContainer(pb))
		switch {
		case err == nil:
			carriers[pod.UID] = carrier{name: pod.Name, addedAt: time.Now()}
			injections.WithLabelValues(pb.Namespace, resultAdded).Inc()
			logger.Info("added debug container", "pod", klog.KObj(pod), "container", ContainerName(pb.Name))
			r.Recorder.Eventf(pb, pod, corev1.EventTypeNormal, "Injected", "AddEphemeralContainer",
				"Added ephemeral container %s (image %s, profile %s) to pod %s", ContainerName(pb.Name), pb.Spec.Image, pb.Spec.Profile, pod.Name)
		case apierrors.IsNotFound(err):
			// The pod is gone; its deletion brings us back if it matters.
		case apierrors.IsConflict(err):
			// The cache is behind the pod (or its UID changed): look again
			// once the watch catches up, never on stale data.
			result.RequeueAfter = time.Second
		default:
			injections.WithLabelValues(pb.Namespace, resultFailed).Inc()
			r.Recorder.Eventf(pb, pod, corev1.EventTypeWarning, debugv1alpha1.ReasonInjectionFailed, "AddEphemeralContainer",
				"Adding ephemeral container %s to pod %s failed: %v", ContainerName(pb.Name), pod.Name, err)
			errs = append(errs, fmt.Errorf("adding debug container to pod %s: %w", pod.Name, err))
		}
	}
	return result, errs
}

// refused reports whether the apiserver refused a request for good: Pod
// Security or validation. Retrying the same request soon won't help; a change
// to the pod, the namespace or the PodBugger brings the controller back.
func refused(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err)
}

// addContainer adds c to pod's ephemeral containers through the
// pods/ephemeralcontainers subresource. The update carries the cached pod's
// UID and resourceVersion, so it fails with a conflict rather than act on a
// pod the cache does not show as it is; and the apiserver refuses a second
// container of the same name, so a pod can never get it twice.
func (r *PodBuggerReconciler) addContainer(ctx context.Context, pod *corev1.Pod, c corev1.EphemeralContainer) error {
	updated := pod.DeepCopy()
	updated.Spec.EphemeralContainers = append(updated.Spec.EphemeralContainers, c)
	return r.SubResource("ephemeralcontainers").Update(ctx, updated, client.FieldOwner(fieldOwner))
}

// SetupWithManager watches PodBuggers, the pods of their namespaces and the
// namespaces' labels.
func (r *PodBuggerReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&debugv1alpha1.PodBugger{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.podBuggersInNamespaceOf),
			builder.WithPredicates(podChanged)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.podBuggersIn),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Complete(r)
}

// podBuggersInNamespaceOf maps a pod to every PodBugger of its namespace.
// There are few of those, and a pod that stops matching may still carry a
// container a PodBugger counts.
func (r *PodBuggerReconciler) podBuggersInNamespaceOf(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.list(ctx, obj.GetNamespace())
}

// podBuggersIn maps a namespace to its PodBuggers.
func (r *PodBuggerReconciler) podBuggersIn(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.list(ctx, obj.GetName())
}

func (r *PodBuggerReconciler) list(ctx context.Context, namespace string) []reconcile.Request {
	list := &debugv1alpha1.PodBuggerList{}
	if err := r.List(ctx, list, client.InNamespace(namespace)); err != nil {
		log.FromContext(ctx).Error(err, "listing PodBuggers", "namespace", namespace)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, pb := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pb)})
	}
	return reqs
}

// podChanged passes the pod events a PodBugger cares about: creation,
// deletion, and updates of labels, phase, deletion or ephemeral containers.
// Status churn (conditions, probes) is dropped.
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
			(oldPod.DeletionTimestamp == nil) != (newPod.DeletionTimestamp == nil)
	},
}
