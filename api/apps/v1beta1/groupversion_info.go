// Package v1beta1 holds the apps.deckhand.dev/v1beta1 API: PodSet, which
// keeps a number of pods of one template running.
// +kubebuilder:object:generate=true
// +groupName=apps.deckhand.dev
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "apps.deckhand.dev", Version: "v1beta1"}

	// SchemeBuilder registers the kinds of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &PodSet{}, &PodSetList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
