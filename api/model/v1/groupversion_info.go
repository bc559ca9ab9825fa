// Package v1 contains the model.deckhand.dev/v1 API: ModelBox, one resource
// that becomes a Deployment, a Service and, when asked, a
// HorizontalPodAutoscaler and a PodDisruptionBudget.
//
// +kubebuilder:object:generate=true
// +groupName=model.deckhand.dev
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "model.deckhand.dev", Version: "v1"}

	// SchemeBuilder registers this API's kinds with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this API's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ModelBox{}, &ModelBoxList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
