// Package v1 holds the batch.deckhand.dev/v1 API: JobWatcher and
// ClusterJobWatcher, policies that delete finished Jobs after per-outcome
// TTLs.
// +kubebuilder:object:generate=true
// +groupName=batch.deckhand.dev
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "batch.deckhand.dev", Version: "v1"}

	// SchemeBuilder registers the kinds of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &JobWatcher{}, &JobWatcherList{}, &ClusterJobWatcher{}, &ClusterJobWatcherList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
