package manager

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// podCache is how the manager's cache holds pods. A cluster holds many more
// pods than Deckhand ever acts on, a full pod is several kilobytes in memory,
// and a PodSet's pods carry the template a namespace editor sized (up to the
// object size limit), so every pod is cached slimmed by SlimPod.
func podCache() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Transform: SlimPod},
	}
}

// SlimPod is the cache transform for pods. A pod keeps its metadata, which
// every reader decides on (name, namespace, UID, resourceVersion,
// generation, creation and deletion timestamps, labels for selectors, owner
// references for adoption and release, finalizers; annotations and
// managedFields are dropped), and the fields each controller of the registry
// reads from the cache (SlimPod of its entry: PodBugger's names of
// containers, node, phase and ephemeral container statuses; PodSet's status,
// node and deletion-order annotations of the pods it controls). No pod is
// kept whole: a reader that needs more reads it from the apiserver
// (PodBugger plans every injection on an uncached list). A controller that
// reads another field from the cache adds it to its entry's SlimPod.
func SlimPod(obj any) (any, error) {
	return slimPod(controllers, obj)
}

func slimPod(registry []Controller, obj any) (any, error) {
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
	}
	for _, c := range registry {
		if c.SlimPod != nil {
			c.SlimPod(pod, slim)
		}
	}
	return slim, nil
}
