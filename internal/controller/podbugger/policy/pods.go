package policy

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/eventnote"
)

// ReasonHostAccess is the reason of the Event that says a pod was skipped
// because it reaches into its node (HostAccess).
const ReasonHostAccess = "PodReachesHost"

// HostAccess lists how pod reaches into its node: the node's process,
// network or IPC namespaces, privileged containers, host paths, directly or
// through a claim bound to a hostPath or local PersistentVolume (claimed:
// the volumes bound to the pod's claims, by the pod's volume name, as the
// caller read them), and, when the debug container gets the general
// profile, capabilities a container adds beyond Pod Security's baseline. A
// debug container shares the pod's namespaces and, through /proc/<pid>/root
// of its target, sees the target's mounts; with the general profile's
// SYS_PTRACE it can act as any process of the pod, with that process's
// capabilities (CAP_SYS_ADMIN mounts the node's disks): in such a pod it
// reaches the node too. None for an ordinary pod.
func HostAccess(pod *corev1.Pod, profile debugv1beta1.Profile, claimed map[string]*corev1.PersistentVolume) []string {
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
	var names, capable []string
	check := func(name string, sc *corev1.SecurityContext) {
		if privileged(sc) {
			names = append(names, name)
		}
		if caps := beyondBaseline(sc); profile == debugv1beta1.ProfileGeneral && len(caps) > 0 {
			capable = append(capable, name+" ("+strings.Join(caps, ", ")+")")
		}
	}
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		check(c.Name, c.SecurityContext)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		check(c.Name, c.SecurityContext)
	}
	if len(names) > 0 {
		out = append(out, "privileged container "+eventnote.List(names))
	}
	if len(capable) > 0 {
		out = append(out, "capabilities added to container "+eventnote.List(capable)+", which the general profile's SYS_PTRACE can act with")
	}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil {
			out = append(out, "hostPath volume "+v.Name)
		}
		switch pv := claimed[v.Name]; {
		case pv == nil:
		case pv.Spec.HostPath != nil:
			out = append(out, "volume "+v.Name+" bound to hostPath PersistentVolume "+pv.Name)
		case pv.Spec.Local != nil:
			out = append(out, "volume "+v.Name+" bound to local PersistentVolume "+pv.Name)
		}
	}
	return out
}

// baselineCapabilities are the capabilities Pod Security's baseline level
// lets a container add: the container runtimes' default set, which every
// container has anyway.
var baselineCapabilities = []string{"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",
	"MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}

// beyondBaseline lists the capabilities sc adds beyond baselineCapabilities
// (ALL, SYS_ADMIN, NET_ADMIN, SYS_PTRACE, …), as written.
func beyondBaseline(sc *corev1.SecurityContext) []string {
	if sc == nil || sc.Capabilities == nil {
		return nil
	}
	var out []string
	for _, c := range sc.Capabilities.Add {
		name := strings.TrimPrefix(strings.ToUpper(string(c)), "CAP_")
		if !slices.Contains(baselineCapabilities, name) {
			out = append(out, string(c))
		}
	}
	return out
}

// ClaimedVolumes lists the names of pod's volumes that are
// PersistentVolumeClaims, each with its claim's name: a claim named in the
// volume, or the one Kubernetes makes for an ephemeral volume
// (<pod>-<volume>). Their PersistentVolumes decide whether they reach the
// node (HostAccess).
func ClaimedVolumes(pod *corev1.Pod) map[string]string {
	var out map[string]string
	for _, v := range pod.Spec.Volumes {
		claim := ""
		switch {
		case v.PersistentVolumeClaim != nil:
			claim = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			claim = pod.Name + "-" + v.Name
		default:
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[v.Name] = claim
	}
	return out
}

// SkipPod reports whether a PodBugger of the given profile must leave pod
// alone under p, and why: a pod that reaches into its node (HostAccess) is
// skipped unless the operator allows it (--podbugger-allow-host-access).
func (p Policy) SkipPod(pod *corev1.Pod, profile debugv1beta1.Profile, claimed map[string]*corev1.PersistentVolume) (reason, note string, skip bool) {
	if p.AllowHostAccess {
		return "", "", false
	}
	access := HostAccess(pod, profile, claimed)
	if len(access) == 0 {
		return "", "", false
	}
	return ReasonHostAccess, "pod reaches into its node (" + eventnote.List(access) +
		"), and so would a debug container in it; the operator allows that with --podbugger-allow-host-access", true
}
