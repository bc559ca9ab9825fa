package podbugger

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/record"
	"github.com/deckhand-dev/deckhand/internal/scopedcache"
)

// Needs says where the manager must cache pods for this controller: in the
// namespaces that have a PodBugger. A PodBugger injects into pods of its own
// namespace only.
func Needs() []scopedcache.Need {
	return []scopedcache.Need{{Object: &corev1.Pod{}, Triggers: []client.Object{&debugv1beta1.PodBugger{}},
		Namespaces: scopedcache.NamespacesOf(&debugv1beta1.PodBuggerList{})}}
}

// CacheByObject keeps PodIncidents in the manager's cache without what
// they copied from the pod (the log tails, the Events, the node, the
// resources, the messages): the controller finds, counts and prunes records
// by their labels, reason, container and times, and a count's update
// rewrites all it copied anyway. A record can hold some 20 KiB of a
// tenant's text; the cache keeps a few hundred bytes of it.
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&debugv1beta1.PodIncident{}: {Transform: func(obj any) (any, error) {
			if inc, ok := obj.(*debugv1beta1.PodIncident); ok {
				record.Slim(inc)
			}
			return obj, nil
		}},
	}
}

// SlimPod copies into slim the fields of pod the PodBugger controller reads
// from the cache, which keeps only those (and the metadata) of a pod no
// controller keeps whole: its node, the names of its containers, init
// containers and ephemeral containers (carriers, targetContainerName, name
// clashes), its phase (PodBugger injects into Running pods only) and its
// ephemeral containers' statuses (whether a debugger started); and, for
// the incident recorder, what shows a failure: the containers' (and init
// containers') states and
// last terminations (without their messages, which it reads afresh), restart
// counts and readiness, the Ready and DisruptionTarget conditions and the
// pod's reason (Evicted).
func SlimPod(pod, slim *corev1.Pod) {
	slim.Spec.NodeName = pod.Spec.NodeName
	slim.Spec.Containers = containerNames(pod.Spec.Containers)
	slim.Spec.InitContainers = containerNames(pod.Spec.InitContainers)
	slim.Spec.EphemeralContainers = ephemeralContainerNames(pod.Spec.EphemeralContainers)
	slim.Status.Phase = pod.Status.Phase
	slim.Status.EphemeralContainerStatuses = pod.Status.EphemeralContainerStatuses
	slim.Status.Reason = pod.Status.Reason
	// Another kind's SlimPod may have kept them whole already (PodSet keeps
	// its pods' status): what it kept is a superset of this.
	if slim.Status.ContainerStatuses == nil {
		slim.Status.ContainerStatuses = failureStatuses(pod.Status.ContainerStatuses)
	}
	if slim.Status.InitContainerStatuses == nil {
		slim.Status.InitContainerStatuses = failureStatuses(pod.Status.InitContainerStatuses)
	}
	for _, c := range pod.Status.Conditions {
		if (c.Type == corev1.PodReady || c.Type == corev1.DisruptionTarget) &&
			!slices.ContainsFunc(slim.Status.Conditions, func(k corev1.PodCondition) bool { return k.Type == c.Type }) {
			slim.Status.Conditions = append(slim.Status.Conditions,
				corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, LastTransitionTime: c.LastTransitionTime})
		}
	}
}

// failureStatuses is what failuresOf reads of container statuses.
func failureStatuses(cs []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(cs))
	for i, s := range cs {
		out[i] = corev1.ContainerStatus{Name: s.Name, Ready: s.Ready, RestartCount: s.RestartCount,
			State:                slimState(s.State),
			LastTerminationState: slimState(s.LastTerminationState)}
	}
	return out
}

func slimState(s corev1.ContainerState) corev1.ContainerState {
	var out corev1.ContainerState
	if s.Running != nil {
		out.Running = &corev1.ContainerStateRunning{}
	}
	if s.Waiting != nil {
		out.Waiting = &corev1.ContainerStateWaiting{Reason: s.Waiting.Reason}
	}
	if t := s.Terminated; t != nil {
		out.Terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Signal: t.Signal, Reason: t.Reason,
			StartedAt: t.StartedAt, FinishedAt: t.FinishedAt, ContainerID: t.ContainerID}
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
