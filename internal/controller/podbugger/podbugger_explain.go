package podbugger

import (
	corev1 "k8s.io/api/core/v1"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

// DebugContainerFor is the ephemeral container pb adds to a pod, as the
// controller builds it: for a person asking what a PodBugger would inject
// (`kubectl deckhand debug`).
func DebugContainerFor(pb *debugv1beta1.PodBugger) corev1.EphemeralContainer {
	return debugContainer(pb)
}
