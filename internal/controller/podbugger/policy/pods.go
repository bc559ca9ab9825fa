package policy

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/deckhand-dev/deckhand/internal/eventnote"
)

// ReasonHostAccess is the reason of the Event that says a pod was skipped
// because it reaches into its node (HostAccess).
const ReasonHostAccess = "PodReachesHost"

// HostAccess lists how pod reaches into its node: the node's process,
// network or IPC namespaces, privileged containers, host paths. A debug
// container shares the pod's namespaces and, through /proc/<pid>/root of
// its target, sees the target's mounts: in such a pod it reaches the node
// too. None for an ordinary pod.
func HostAccess(pod *corev1.Pod) []string {
	var out []string
	if pod.Spec.HostPID {
		out = append(out, "hostPID")
	}
	if pod.Spec.HostNetwork {
		out = append(out, "hostNetwork")
	}
	if pod.Spec.HostIPC {
		out = append(out, "hostIPC")
	}
	privileged := func(sc *corev1.SecurityContext) bool { return sc != nil && sc.Privileged != nil && *sc.Privileged }
	var names []string
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		if privileged(c.SecurityContext) {
			names = append(names, c.Name)
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if privileged(c.SecurityContext) {
			names = append(names, c.Name)
		}
	}
	if len(names) > 0 {
		out = append(out, "privileged container "+eventnote.List(names))
	}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil {
			out = append(out, "hostPath volume "+v.Name)
		}
	}
	return out
}

// SkipPod reports whether a PodBugger must leave pod alone under p, and
// why: a pod that reaches into its node is skipped unless the operator
// allows it (--podbugger-allow-host-access).
func (p Policy) SkipPod(pod *corev1.Pod) (reason, note string, skip bool) {
	if p.AllowHostAccess {
		return "", "", false
	}
	access := HostAccess(pod)
	if len(access) == 0 {
		return "", "", false
	}
	return ReasonHostAccess, "pod reaches into its node (" + eventnote.List(access) +
		"), and so would a debug container in it; the operator allows that with --podbugger-allow-host-access", true
}
