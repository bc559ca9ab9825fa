package modelbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	autoscalingv2ac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	"github.com/deckhand-dev/deckhand/internal/eventnote"
)

const (
	// FieldManager owns, through server-side apply, every field Deckhand sets
	// on a child.
	FieldManager = "deckhand"
	// handoverManager keeps a Deployment's replicas while they pass from
	// Deckhand to the HorizontalPodAutoscaler (see handOverReplicas).
	handoverManager = "deckhand-replicas-handover"
)

// childGVKs are the kinds of a ModelBox's children, by Kind.
var childGVKs = map[string]schema.GroupVersionKind{
	"Deployment":              appsv1.SchemeGroupVersion.WithKind("Deployment"),
	"Service":                 corev1.SchemeGroupVersion.WithKind("Service"),
	"HorizontalPodAutoscaler": autoscalingv2.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler"),
	"PodDisruptionBudget":     policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"),
}

// sync makes box's children match its spec: each one that differs in a
// field Deckhand owns is applied, each one no longer wanted is deleted, and
// one already right costs nothing. It says whether what obs shows is already
// out of date: it created a child, or the cache does not yet show one.
func (r *ModelBoxReconciler) sync(ctx context.Context, box *modelv1.ModelBox, obs observed) (outdated bool, err error) {
	var current *int32
	if obs.deployment != nil {
		current = obs.deployment.Spec.Replicas
	}
	want, err := desiredFor(box, current)
	if err != nil {
		return false, fmt.Errorf("building children: %w", err)
	}
	w := &written{}
	err = errors.Join(
		r.syncDeployment(ctx, w, box, obs.deployment, want.deployment),
		syncExtracted(ctx, r, w, box, "Service", obs.service, want.service, corev1ac.ExtractService),
		syncExtracted(ctx, r, w, box, "HorizontalPodAutoscaler", obs.hpa, want.hpa, autoscalingv2ac.ExtractHorizontalPodAutoscaler),
		syncExtracted(ctx, r, w, box, "PodDisruptionBudget", obs.pdb, want.pdb, policyv1ac.ExtractPodDisruptionBudget),
	)
	w.tell(r.Recorder, box)
	return len(w.created.kinds) > 0 || w.behind, err
}

// written gathers the children one sync created, updated and deleted, to
// tell them in one Event per kind of change rather than one per child: an
// Event is an API write, and a new ModelBox's children were two or three
// of the eight writes it cost.
type written struct {
	created, updated, deleted writesOfKind
	// behind: a child this ModelBox controls exists but the cache does not
	// show it yet.
	behind bool
}

// writesOfKind are the kinds of children written one way, and the first
// such child, the Events' related object.
type writesOfKind struct {
	kinds   []string
	related runtime.Object
}

func (c *writesOfKind) add(kind string, obj runtime.Object) {
	if len(c.kinds) == 0 {
		c.related = obj
	}
	c.kinds = append(c.kinds, kind)
}

// tell records the Events: "Created Deployment, Service and
// PodDisruptionBudget model-a".
func (w *written) tell(rec events.EventRecorder, box *modelv1.ModelBox) {
	for _, e := range []struct {
		writes         writesOfKind
		reason, action string
	}{
		{w.created, EventCreated, "Apply"},
		{w.updated, EventUpdated, "Apply"},
		{w.deleted, EventDeleted, "Delete"},
	} {
		if len(e.writes.kinds) > 0 {
			rec.Eventf(box, e.writes.related, corev1.EventTypeNormal, e.reason, e.action, "%s %s %s", e.reason, eventnote.List(e.writes.kinds), box.Name)
		}
	}
}

// syncExtracted is syncChild for one kind: extract reads the fields Deckhand
// owns on live.
func syncExtracted[T any, PT interface {
	*T
	client.Object
}, A any, PA interface {
	*A
	runtime.ApplyConfiguration
}](ctx context.Context, r *ModelBoxReconciler, w *written, box *modelv1.ModelBox, kind string, live PT, want PA, extract func(*T, string) (PA, error)) error {
	return r.syncChild(ctx, w, box, kind, orNil[client.Object](live), orNil[runtime.ApplyConfiguration](want), func() (runtime.ApplyConfiguration, error) {
		owned, err := extract(live, FieldManager)
		if err != nil {
			return nil, fmt.Errorf("reading the fields Deckhand owns on %s %s: %w", kind, client.ObjectKeyFromObject(live), err)
		}
		return orNil[runtime.ApplyConfiguration](owned), nil
	})
}

// syncDeployment is syncChild for the Deployment, plus the replicas
// handover when spec.replicas is left out: the count then belongs to
// whoever scales the Deployment (the autoscaler, kubectl scale), and turning
// autoscaling off keeps the count it left.
func (r *ModelBoxReconciler) syncDeployment(ctx context.Context, w *written, box *modelv1.ModelBox, live *appsv1.Deployment, want *appsv1ac.DeploymentApplyConfiguration) error {
	if live == nil && box.Spec.Replicas == nil && box.Spec.Autoscaling != nil {
		// Start at the autoscaler's floor rather than the Deployment's
		// default of one pod; the next pass hands the field over.
		want.Spec.WithReplicas(minReplicasOf(box))
	}
	// Reading the fields Deckhand owns, on a Deployment this ModelBox
	// controls and that does not already match, also tells whether the
	// count must be handed over before an apply drops it. (When it
	// matches, Deckhand owns the count exactly when spec.replicas is set.)
	return r.syncChild(ctx, w, box, "Deployment", orNil[client.Object](live), orNil[runtime.ApplyConfiguration](want), func() (runtime.ApplyConfiguration, error) {
		owned, err := appsv1ac.ExtractDeployment(live, FieldManager)
		if err != nil {
			return nil, fmt.Errorf("reading the fields Deckhand owns on Deployment %s: %w", client.ObjectKeyFromObject(live), err)
		}
		if box.Spec.Replicas == nil && owned.Spec != nil && owned.Spec.Replicas != nil {
			if err := r.handOverReplicas(ctx, live.Namespace, live.Name, live.Spec.Replicas); err != nil {
				return nil, err
			}
		}
		return owned, nil
	})
}

// handOverReplicas lets go of a Deployment's replicas without the value
// changing. Dropping a field from an apply removes it when the applier is its
// only owner, and the Deployment would fall back to one pod. So another field
// manager first applies the current value, sharing the field; once Deckhand
// applies without it, the handover manager holds it until someone (the
// autoscaler, kubectl scale, Deckhand once spec.replicas is set) writes a new
// count and takes it.
//
// The apply does not force: if someone else already changed the count, it
// conflicts, and the retry sees that Deckhand no longer owns the field.
func (r *ModelBoxReconciler) handOverReplicas(ctx context.Context, namespace, name string, replicas *int32) error {
	n := int32(1)
	if replicas != nil {
		n = *replicas
	}
	ac := appsv1ac.Deployment(name, namespace).WithSpec(appsv1ac.DeploymentSpec().WithReplicas(n))
	if err := r.Apply(ctx, ac, client.FieldOwner(handoverManager)); err != nil {
		return fmt.Errorf("handing over the replicas of Deployment %s/%s: %w", namespace, name, err)
	}
	countWrite(types.NamespacedName{Namespace: namespace, Name: name}, "Deployment", outcomeHandover)
	return nil
}

// syncChild makes one child match: live is the cached object (nil when
// absent), want what it should be (nil when it should not exist) and owned
// reads the fields Deckhand owns on live. What it wrote goes into w.
func (r *ModelBoxReconciler) syncChild(ctx context.Context, w *written, box *modelv1.ModelBox, kind string, live client.Object, want runtime.ApplyConfiguration, owned func() (runtime.ApplyConfiguration, error)) error {
	key := client.ObjectKeyFromObject(box)
	child := verifiedKey{box: key, kind: kind}
	if live != nil && !metav1.IsControlledBy(live, box) {
		if want == nil {
			// Not ours and not wanted (a child orphaned by an earlier
			// ModelBox of this name, say): nothing to do.
			return nil
		}
		return fmt.Errorf("%s %s exists and is not controlled by this ModelBox: rename or delete it", kind, key)
	}
	if want == nil {
		if live == nil {
			return nil
		}
		r.verified.drop(child)
		r.made.drop(child)
		uid := live.GetUID()
		if err := r.Delete(ctx, live, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting %s %s: %w", kind, key, err)
		}
		countWrite(key, kind, outcomeDeleted)
		w.deleted.add(kind, live)
		return nil
	}
	if live != nil {
		r.made.drop(child) // the cache shows it
		same, err := r.matches(child, live, want, owned)
		if err != nil || same {
			return err
		}
	}
	if live == nil {
		if r.made.recent(child, r.Now()) {
			// Created by this manager less than a second ago: the cache
			// has not caught up (see madeChildren).
			w.behind = true
			return nil
		}
		// The cache shows only labelled children: make sure this is not
		// someone else's object before taking it over.
		exists, err := r.checkUnowned(ctx, box, kind, key)
		if err != nil {
			return err
		}
		if exists {
			// Ours, made by an earlier pass the cache has not caught up
			// with: its creation event brings the next pass.
			w.behind = true
			return nil
		}
	} else {
		// The cache may still show a child that someone has since replaced
		// by an object of their own of that name: the apply names the child
		// it means by UID, and the apiserver refuses it for any other.
		setUID(want, live.GetUID())
	}
	logf.FromContext(ctx).V(1).Info("applying", "kind", kind, "exists", live != nil)
	if err := r.Apply(ctx, want, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		if live != nil && uidRefused(err) {
			// Not a fault of the ModelBox: the next pass sees the object.
			err = apierrors.NewConflict(schema.GroupResource{Group: childGVKs[kind].Group, Resource: kind}, key.Name,
				errors.New("replaced by another object since the cache saw it"))
		}
		return fmt.Errorf("applying %s %s: %w", kind, key, err)
	}
	applied := appliedMeta(want, kind)
	switch {
	case live == nil:
		r.made.record(child, r.Now())
		countWrite(key, kind, outcomeCreated)
		w.created.add(kind, applied)
	case applied.ResourceVersion != live.GetResourceVersion():
		countWrite(key, kind, outcomeUpdated)
		w.updated.add(kind, applied)
	default:
		countWrite(key, kind, outcomeUnchanged)
	}
	return nil
}

// matches says whether the fields Deckhand owns on live, a child this
// ModelBox controls, are want. A child and a wish both unchanged since a
// pass found them equal are not read again (see verified).
func (r *ModelBoxReconciler) matches(child verifiedKey, live client.Object, want runtime.ApplyConfiguration, owned func() (runtime.ApplyConfiguration, error)) (bool, error) {
	fp, ok := fingerprintsOf(live, want)
	if ok && r.verified.holds(child, fp) {
		return true, nil
	}
	r.verified.compared.Add(1)
	has, err := owned()
	if err != nil {
		return false, err
	}
	if !equality.Semantic.DeepEqual(want, has) {
		r.verified.drop(child)
		return false, nil
	}
	if ok {
		r.verified.remember(child, fp)
	}
	return true, nil
}

// setUID makes ac, a child's apply configuration, name the object with
// uid: the apiserver refuses to apply it to another (a Conflict).
func setUID(ac runtime.ApplyConfiguration, uid types.UID) {
	switch ac := ac.(type) {
	case *appsv1ac.DeploymentApplyConfiguration:
		ac.WithUID(uid)
	case *corev1ac.ServiceApplyConfiguration:
		ac.WithUID(uid)
	case *autoscalingv2ac.HorizontalPodAutoscalerApplyConfiguration:
		ac.WithUID(uid)
	case *policyv1ac.PodDisruptionBudgetApplyConfiguration:
		ac.WithUID(uid)
	}
}

// uidRefused reports whether the apiserver refused an apply because the
// object of that name has another UID than the apply named.
func uidRefused(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	return slices.ContainsFunc(status.Status().Details.Causes, func(c metav1.StatusCause) bool { return c.Field == "metadata.uid" })
}

// checkUnowned reads past the cache a child the cache does not show: it
// says whether it exists as the cache will show it (box controls it and it
// carries the label the cache selects on; without the label, an apply puts
// it back), and fails when it exists and belongs to something else than
// box.
func (r *ModelBoxReconciler) checkUnowned(ctx context.Context, box *modelv1.ModelBox, kind string, key client.ObjectKey) (bool, error) {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(childGVKs[kind])
	if err := r.APIReader.Get(ctx, key, obj); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(obj, box) {
		return false, fmt.Errorf("%s %s exists and is not controlled by this ModelBox: rename or delete it", kind, key)
	}
	_, labelled := obj.Labels[LabelModelBox]
	return labelled, nil
}

// appliedMeta is the metadata of the object an apply returned into ac.
// It serves as the Event's related object, so that the events.k8s.io
// recorder, which folds Events that differ only in their note into one
// series, keeps one Event per child.
func appliedMeta(ac runtime.ApplyConfiguration, kind string) *metav1.PartialObjectMetadata {
	obj := &metav1.PartialObjectMetadata{}
	if data, err := json.Marshal(ac); err == nil {
		_ = json.Unmarshal(data, obj)
	}
	obj.SetGroupVersionKind(childGVKs[kind])
	return obj
}

// orNil turns a nil pointer into a nil interface I, so that syncChild can
// tell "absent" by comparing with nil.
func orNil[I any, T any](p *T) I {
	if p == nil {
		var none I
		return none
	}
	return any(p).(I)
}
