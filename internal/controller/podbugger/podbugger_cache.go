package podbugger

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/scopedcache"
)

// Needs says where the manager must cache pods for this controller: in the
// namespaces that have a PodBugger. A PodBugger injects into pods of its own
// namespace only.
func Needs() []scopedcache.Need {
	return []scopedcache.Need{{Object: &corev1.Pod{}, Triggers: []client.Object{&debugv1beta1.PodBugger{}},
		Namespaces: scopedcache.NamespacesOf(&debugv1beta1.PodBuggerList{})}}
}

// SlimPod copies into slim the fields of pod the PodBugger controller reads
// from the cache, which keeps only those (and the metadata) of a pod no
// controller keeps whole: its node, the names of its containers, init
// containers and ephemeral containers (carriers, targetContainerName, name
// clashes), its phase (PodBugger injects into Running pods only) and its
// ephemeral containers' statuses (whether a debugger started).
func SlimPod(pod, slim *corev1.Pod) {
	slim.Spec.NodeName = pod.Spec.NodeName
	slim.Spec.Containers = containerNames(pod.Spec.Containers)
	slim.Spec.InitContainers = containerNames(pod.Spec.InitContainers)
	slim.Spec.EphemeralContainers = ephemeralContainerNames(pod.Spec.EphemeralContainers)
	slim.Status.Phase = pod.Status.Phase
	slim.Status.EphemeralContainerStatuses = pod.Status.EphemeralContainerStatuses
}

func containerNames(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name}
	}
	return out
}

func ephemeralContainerNames(cs []corev1.EphemeralContainer) []corev1.EphemeralContainer {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.EphemeralContainer, len(cs))
	for i, c := range cs {
		out[i] = corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: c.Name}}
	}
	return out
}
