// Package modelbox runs ModelBoxes: each becomes a Deployment, a Service and,
// when asked, a HorizontalPodAutoscaler and a PodDisruptionBudget, kept in
// line with the spec by server-side apply.
package modelbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	"github.com/deckhand-dev/deckhand/internal/pace"
	"github.com/deckhand-dev/deckhand/internal/setupoptions"
	"github.com/deckhand-dev/deckhand/internal/status"
)

// ControllerName names the controller, its Events and its metrics.
const ControllerName = "modelbox"

// Event reasons on a ModelBox, one Event per child written.
const (
	// EventCreated: a child (Deployment, Service, HorizontalPodAutoscaler or PodDisruptionBudget) was created.
	EventCreated = "Created"
	// EventUpdated: a child was changed back to what the spec says.
	EventUpdated = "Updated"
	// EventDeleted: a child the spec no longer asks for was deleted.
	EventDeleted = "Deleted"
)

// ModelBoxReconciler makes a ModelBox's children match its spec and reports
// their state in its status.
type ModelBoxReconciler struct {
	client.Client
	// APIReader reads past the cache, to check a child the cache does not
	// show before creating it.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Now is the clock for condition transition times.
	Now func() time.Time

	status   *status.Writer[modelv1.ModelBoxStatus]
	verified *verified
	first    pace.Holds // a new ModelBox's first status (waitedOn)
	made     *madeChildren
}

// NewModelBoxReconciler returns a reconciler that writes through c, reads
// through c's cache and, for what the cache does not show, apiReader.
func NewModelBoxReconciler(c client.Client, apiReader client.Reader, rec events.EventRecorder) *ModelBoxReconciler {
	r := &ModelBoxReconciler{
		Client:    c,
		APIReader: apiReader,
		Recorder:  rec,
		Now:       time.Now,
		verified:  newVerified(),
		made:      newMadeChildren(),
	}
	r.status = status.NewWriter(c,
		status.ConditionMetrics("ModelBox", func(s *modelv1.ModelBoxStatus) []metav1.Condition { return s.Conditions }),
		status.Paced(statusInterval, func() time.Time { return r.Now() }, urgentStatus))
	return r
}

// +kubebuilder:rbac:groups=model.deckhand.dev,resources=modelboxes,verbs=get;list;watch
// +kubebuilder:rbac:groups=model.deckhand.dev,resources=modelboxes/status,verbs=get;patch
// +kubebuilder:rbac:groups=model.deckhand.dev,resources=modelboxes/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete

// Setup registers the ModelBox controller with mgr.
func Setup(mgr ctrl.Manager, _ setupoptions.Options) error {
	r := NewModelBoxReconciler(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetEventRecorder(ControllerName))
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&modelv1.ModelBox{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&autoscalingv2.HorizontalPodAutoscaler{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		// Each sync is a few sequential API calls for one ModelBox's own
		// children: with one worker, 300 new ModelBoxes wait in line.
		WithOptions(controller.Options{MaxConcurrentReconciles: 16}).
		Complete(r)
}

// Reconcile makes one ModelBox's children match its spec, then records what
// it saw in the status.
//
// A pass that is outdated (what it saw predates children it just created,
// or the cache has not shown them yet) writes no status: it would say they
// are missing, and their creation events bring the next pass. A conflict
// only means another writer got there first: it is retried without calling
// the ModelBox degraded. Refusals are retried with backoff too, not made
// terminal: some (a node port another Service holds) clear up without any
// change the controller watches. The first status of a ModelBox whose
// children this pass or a recent one created waits for its rollout, up to
// statusInterval (see modelbox_first.go).
func (r *ModelBoxReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	box := &modelv1.ModelBox{}
	if err := r.Get(ctx, req.NamespacedName, box); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("reading ModelBox %s: %w", req.NamespacedName, err)
	}
	if !box.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // garbage collection removes the children
	}
	ctx = logf.IntoContext(ctx, logf.FromContext(ctx).WithValues("modelbox", klog.KObj(box)))

	obs, err := r.observe(ctx, box)
	if err != nil {
		return ctrl.Result{}, err
	}
	outdated, syncErr := r.sync(ctx, box, obs)
	if outdated && len(box.Status.Conditions) == 0 {
		r.first.Start(req.NamespacedName, r.Now())
	}
	if outdated && syncErr == nil {
		return ctrl.Result{RequeueAfter: statusInterval}, nil // the creation events bring the next pass
	}
	shown := syncErr // a conflict is not shown as Degraded
	if apierrors.IsConflict(syncErr) {
		shown = nil
	}
	now := r.Now()
	want := computeStatus(box, obs, shown, metav1.NewTime(now))
	if wait := r.first.Wait(req.NamespacedName, now, statusInterval, !waitedOn(&want)); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, syncErr
	}
	wait, err := r.status.Write(ctx, box, &box.Status, want)
	if err != nil {
		return ctrl.Result{}, errors.Join(syncErr, fmt.Errorf("writing status of ModelBox %s: %w", req.NamespacedName, err))
	}
	return ctrl.Result{RequeueAfter: wait}, syncErr
}

// forget drops what the controller keeps about a ModelBox that is gone.
func (r *ModelBoxReconciler) forget(key client.ObjectKey) {
	r.status.Forget(key)
	r.verified.forget(key)
	r.first.Forget(key)
	r.made.forget(key)
	forgetMetrics(key)
}

// observed holds a ModelBox's children as the cache shows them; nil means
// absent.
type observed struct {
	deployment *appsv1.Deployment
	service    *corev1.Service
	hpa        *autoscalingv2.HorizontalPodAutoscaler
	pdb        *policyv1.PodDisruptionBudget
}

func (r *ModelBoxReconciler) observe(ctx context.Context, box *modelv1.ModelBox) (observed, error) {
	key := client.ObjectKeyFromObject(box)
	var obs observed
	var err error
	if obs.deployment, err = getCached(ctx, r.Client, key, &appsv1.Deployment{}); err != nil {
		return obs, err
	}
	if obs.service, err = getCached(ctx, r.Client, key, &corev1.Service{}); err != nil {
		return obs, err
	}
	if obs.hpa, err = getCached(ctx, r.Client, key, &autoscalingv2.HorizontalPodAutoscaler{}); err != nil {
		return obs, err
	}
	obs.pdb, err = getCached(ctx, r.Client, key, &policyv1.PodDisruptionBudget{})
	return obs, err
}

func getCached[T client.Object](ctx context.Context, c client.Reader, key client.ObjectKey, obj T) (T, error) {
	var none T
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return none, nil
		}
		return none, fmt.Errorf("reading %T %s: %w", obj, key, err)
	}
	return obj, nil
}
