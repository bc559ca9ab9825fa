package manager

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
)

// podCache is how the manager's cache holds pods. Two controllers read them:
// PodSet (its own pods, in full) and PodBugger (any pod of a namespace with a
// PodBugger, to pick the ones to inject into). A cluster holds many more pods
// than Deckhand ever acts on, and a full pod is several kilobytes in memory,
// so every pod that no PodSet controls is cached slimmed by SlimPod.
func podCache() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Transform: SlimPod},
	}
}

// SlimPod is the cache transform for pods. A pod controlled by a PodSet keeps
// its whole status (the PodSet controller's readiness, availability and
// failure reports read it) and, of its annotations, the two that order
// deletions (apps.deckhand.dev/delete-first,
// controller.kubernetes.io/pod-deletion-cost); its spec is slimmed as any
// pod's: the template a namespace editor wrote (up to the object size limit)
// is not held once per pod. Any pod keeps only what a controller decides on
// from the cache:
//
//   - metadata: name, namespace, UID, resourceVersion, generation, creation
//     and deletion timestamps, labels (selectors), owner references (adoption
//     and release) and finalizers; annotations are dropped;
//   - spec: nodeName, and the names of its containers, init containers and
//     ephemeral containers (PodBugger: carriers, targetContainerName, name
//     clashes);
//   - status: phase (PodBugger injects into Running pods only) and the
//     ephemeral containers' statuses (PodBugger reports whether its
//     debugger started).
//
// A reader that needs more of a pod it does not control reads it from the
// apiserver (PodBugger plans every injection on an uncached list). Adding a
// field a controller reads from the cache means adding it here.
func SlimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a tombstone (cache.DeletedFinalStateUnknown) or metadata
	}
	slim := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:                       pod.Name,
			Namespace:                  pod.Namespace,
			UID:                        pod.UID,
			ResourceVersion:            pod.ResourceVersion,
			Generation:                 pod.Generation,
			CreationTimestamp:          pod.CreationTimestamp,
			DeletionTimestamp:          pod.DeletionTimestamp,
			DeletionGracePeriodSeconds: pod.DeletionGracePeriodSeconds,
			Labels:                     pod.Labels,
			OwnerReferences:            pod.OwnerReferences,
			Finalizers:                 pod.Finalizers,
		},
		Spec: corev1.PodSpec{
			NodeName:            pod.Spec.NodeName,
			Containers:          containerNames(pod.Spec.Containers),
			InitContainers:      containerNames(pod.Spec.InitContainers),
			EphemeralContainers: ephemeralContainerNames(pod.Spec.EphemeralContainers),
		},
		// PodBugger reports whether its debug containers started.
		Status: corev1.PodStatus{Phase: pod.Status.Phase, EphemeralContainerStatuses: pod.Status.EphemeralContainerStatuses},
	}
	if appsv1beta1.ControllerRef(pod) != nil {
		slim.Status = pod.Status
		slim.Annotations = kept(pod.Annotations, appsv1beta1.DeleteFirstAnnotation, podDeletionCost)
	}
	return slim, nil
}

// podDeletionCost is the annotation that says which pods are cheaper to
// remove (the ReplicaSet controller's too).
const podDeletionCost = "controller.kubernetes.io/pod-deletion-cost"

// kept is the entries of m under keys, nil when there are none.
func kept(m map[string]string, keys ...string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
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
