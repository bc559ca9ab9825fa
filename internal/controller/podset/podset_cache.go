package podset

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/scopedcache"
)

// Needs says where the manager must cache pods for this controller: in the
// namespaces that have a PodSet. A PodSet acts on pods of its own namespace
// only.
func Needs() []scopedcache.Need {
	return []scopedcache.Need{{Object: &corev1.Pod{}, Triggers: []client.Object{&appsv1beta1.PodSet{}},
		Namespaces: scopedcache.NamespacesOf(&appsv1beta1.PodSetList{})}}
}

// SlimPod copies into slim what the PodSet controller reads from the cache
// of the pods a PodSet controls: their whole status (readiness,
// availability, failures), their node and the two annotations that order
// deletions. Never their spec: the template a namespace editor wrote (up to
// the object size limit) would be held once per pod.
func SlimPod(pod, slim *corev1.Pod) {
	if appsv1beta1.ControllerRef(pod) == nil {
		return
	}
	slim.Spec.NodeName = pod.Spec.NodeName
	slim.Status = *pod.Status.DeepCopy()
	for _, k := range []string{appsv1beta1.DeleteFirstAnnotation, podDeletionCost} {
		if v, ok := pod.Annotations[k]; ok {
			if slim.Annotations == nil {
				slim.Annotations = map[string]string{}
			}
			slim.Annotations[k] = v
		}
	}
}
