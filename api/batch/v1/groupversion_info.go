// Package v1 holds Deckhand's batch API: JobWatcher and ClusterJobWatcher,
// policies that delete finished Jobs after per-outcome TTLs.
// +kubebuilder:object:generate=true
// +groupName=batch.deckhand.dev
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of these kinds.
	GroupVersion = schema.GroupVersion{Group: "batch.deckhand.dev", Version: "v1"}

	// SchemeBuilder registers the kinds with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this group-version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
