package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ControllerRef returns the owner reference of the PodSet controlling o, or
// nil when no PodSet does. Any version of the group counts: pods made before
// an upgrade name the version their PodSet had then (v1alpha1), and stay its
// pods. This is the one rule for "a PodSet controls this pod": the controller
// (which pods are a set's) and the manager's cache (which pods are kept
// whole) both use it, so that they cannot disagree after an upgrade.
func ControllerRef(o metav1.Object) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(o)
	if ref == nil || ref.Kind != "PodSet" {
		return nil
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != GroupVersion.Group {
		return nil
	}
	return ref
}
