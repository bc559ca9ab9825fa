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
// of the pods a PodSet controls: their node, phase, reason and message, the
// Ready condition (readiness, availability), the containers' and init
// containers' states and restart counts (the message of a pod that
// finished, the order of deletions) and the two annotations that order
// deletions. Never their spec: the template a namespace editor wrote (up to
// the object size limit) would be held once per pod; nor the rest of their
// status (addresses, images, resources, mounts), which the controller never
// reads. What it keeps is a superset of what PodBugger's SlimPod keeps of
// the same fields (the containers' statuses, the Ready condition).
func SlimPod(pod, slim *corev1.Pod) {
	if appsv1beta1.ControllerRef(pod) == nil {
		return
	}
	slim.Spec.NodeName = pod.Spec.NodeName
	st := &pod.Status
	slim.Status.Phase, slim.Status.Reason, slim.Status.Message = st.Phase, st.Reason, st.Message
	for _, c := range st.Conditions {
		if c.Type == corev1.PodReady {
			slim.Status.Conditions = append(slim.Status.Conditions,
				corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, LastTransitionTime: c.LastTransitionTime})
		}
	}
	slim.Status.ContainerStatuses = containerStatuses(st.ContainerStatuses)
	slim.Status.InitContainerStatuses = containerStatuses(st.InitContainerStatuses)
	for _, k := range []string{appsv1beta1.DeleteFirstAnnotation, podDeletionCost} {
		if v, ok := pod.Annotations[k]; ok {
			if slim.Annotations == nil {
				slim.Annotations = map[string]string{}
			}
			slim.Annotations[k] = v
		}
	}
}

// containerStatuses are the names, readiness, restart counts and states of
// cs: running, waiting (its reason), terminated (all of it).
func containerStatuses(cs []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(cs))
	for i, s := range cs {
		out[i] = corev1.ContainerStatus{Name: s.Name, Ready: s.Ready, RestartCount: s.RestartCount,
			State: containerState(s.State), LastTerminationState: containerState(s.LastTerminationState)}
	}
	return out
}

func containerState(s corev1.ContainerState) corev1.ContainerState {
	var out corev1.ContainerState
	if s.Running != nil {
		out.Running = &corev1.ContainerStateRunning{}
	}
	if s.Waiting != nil {
		out.Waiting = &corev1.ContainerStateWaiting{Reason: s.Waiting.Reason}
	}
	if s.Terminated != nil {
		out.Terminated = s.Terminated.DeepCopy()
	}
	return out
}
