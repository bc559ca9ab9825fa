package v1alpha1

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
)

// v1alpha1 and v1beta1 hold the same information under other names
// (docs/guides/podset.md, "v1alpha1 → v1beta1"): size is replicas, the rolling
// update's knobs sit in updateStrategy.rollingUpdate, status.nodes is
// status.podNames. Nothing is lost either way, so no annotation is needed.

// ConvertTo converts this PodSet to the hub version, v1beta1.
func (src *PodSet) ConvertTo(dstRaw conversion.Hub) error {
	dst, ok := dstRaw.(*appsv1beta1.PodSet)
	if !ok {
		return fmt.Errorf("converting a v1alpha1 PodSet to %T: not the hub", dstRaw)
	}
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	in := src.Spec.DeepCopy()
	dst.Spec = appsv1beta1.PodSetSpec{
		Replicas:        in.Size,
		Template:        in.Template,
		MinReadySeconds: in.MinReadySeconds,
		UpdateStrategy: appsv1beta1.PodSetUpdateStrategy{
			Type: appsv1beta1.PodSetUpdateStrategyType(in.UpdateStrategy.Type),
			RollingUpdate: appsv1beta1.PodSetRollingUpdate{
				MaxUnavailable: in.UpdateStrategy.MaxUnavailable,
				MaxSurge:       in.UpdateStrategy.MaxSurge,
			},
		},
	}
	s := src.Status.DeepCopy()
	dst.Status = appsv1beta1.PodSetStatus{
		PodNames:            s.Nodes,
		Replicas:            s.Replicas,
		ReadyReplicas:       s.ReadyReplicas,
		AvailableReplicas:   s.AvailableReplicas,
		TerminatingReplicas: s.TerminatingReplicas,
		UpdatedReplicas:     s.UpdatedReplicas,
		Selector:            s.Selector,
		ObservedGeneration:  s.ObservedGeneration,
		Conditions:          s.Conditions,
	}
	return nil
}

// ConvertFrom converts a hub (v1beta1) PodSet to this version.
func (dst *PodSet) ConvertFrom(srcRaw conversion.Hub) error {
	src, ok := srcRaw.(*appsv1beta1.PodSet)
	if !ok {
		return fmt.Errorf("converting %T to a v1alpha1 PodSet: not the hub", srcRaw)
	}
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	in := src.Spec.DeepCopy()
	dst.Spec = PodSetSpec{
		Size:            in.Replicas,
		Template:        in.Template,
		MinReadySeconds: in.MinReadySeconds,
		UpdateStrategy: PodSetUpdateStrategy{
			Type:           PodSetUpdateStrategyType(in.UpdateStrategy.Type),
			MaxUnavailable: in.UpdateStrategy.RollingUpdate.MaxUnavailable,
			MaxSurge:       in.UpdateStrategy.RollingUpdate.MaxSurge,
		},
	}
	s := src.Status.DeepCopy()
	dst.Status = PodSetStatus{
		Nodes:               s.PodNames,
		Replicas:            s.Replicas,
		ReadyReplicas:       s.ReadyReplicas,
		AvailableReplicas:   s.AvailableReplicas,
		TerminatingReplicas: s.TerminatingReplicas,
		UpdatedReplicas:     s.UpdatedReplicas,
		Selector:            s.Selector,
		ObservedGeneration:  s.ObservedGeneration,
		Conditions:          s.Conditions,
	}
	return nil
}
