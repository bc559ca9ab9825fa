// Package v1beta1 holds the debug.deckhand.dev/v1beta1 API: PodBugger,
// which attaches an ephemeral debug container to every running pod that
// matches a selector.
// +kubebuilder:object:generate=true
// +groupName=debug.deckhand.dev
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "debug.deckhand.dev", Version: "v1beta1"}

	// SchemeBuilder registers this package's kinds with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this package's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &PodBugger{}, &PodBuggerList{}, &PodIncident{}, &PodIncidentList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
