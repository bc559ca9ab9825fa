package podbugger

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
)

// plan is what a PodBugger should do about the pods of its namespace.
type plan struct {
	// carriers already have the container. The pod's own
	// spec.ephemeralContainers is the record: it survives restarts of the
	// manager and can never lose an entry.
	carriers []*corev1.Pod
	// inject are the running matching pods to add the container to now,
	// within maxPods, oldest first.
	inject []*corev1.Pod
	// spare are the other pods that could take the container, oldest
	// first: each takes the place of a pod in inject that cannot.
	spare []*corev1.Pod
	// skipped are matching running pods that cannot take the container.
	skipped []skippedPod
}

type skippedPod struct {
	pod    *corev1.Pod
	reason string
	note   string
}

// planFor decides, from the pods of pb's namespace, which carry pb's
// container and which get it now. A suspended PodBugger injects nothing; a
// pod the operator's policy pol keeps out (policy.SkipPod) is skipped.
// Pods in passOver (refused a moment ago) are left out: they take no place
// within maxPods. Without the Running trigger, only the pods in failing (a
// record of pb names them) get the container, if incidents.inject says so.
func planFor(pb *debugv1beta1.PodBugger, selector labels.Selector, pods []corev1.Pod, passOver, failing map[types.UID]bool, pol policy.Policy) plan {
	running, onIncident := policy.InjectsRunning(pb), policy.InjectsOnIncident(pb)
	name := policy.ContainerName(pb.Name)
	var p plan
	var candidates []*corev1.Pod
	for i := range pods {
		pod := &pods[i]
		switch {
		case hasEphemeralContainer(pod, name):
			p.carriers = append(p.carriers, pod)
		case pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil &&
			(running || onIncident && failing[pod.UID]) && selector.Matches(labels.Set(pod.Labels)) && !passOver[pod.UID]:
			candidates = append(candidates, pod)
		}
	}
	if pb.Spec.Suspend {
		return p
	}
	slices.SortFunc(candidates, func(a, b *corev1.Pod) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	room := int(pb.Spec.MaxPods) - len(p.carriers)
	for _, pod := range candidates {
		switch {
		case hasContainer(pod, name):
			p.skipped = append(p.skipped, skippedPod{pod, EventContainerNameTaken,
				"pod already has a container named " + name})
		case pb.Spec.TargetContainerName != "" && !hasContainer(pod, pb.Spec.TargetContainerName):
			p.skipped = append(p.skipped, skippedPod{pod, EventTargetContainerNotFound,
				"pod has no container named " + pb.Spec.TargetContainerName + " (spec.targetContainerName)"})
		case skipsPod(pol, pod, pb.Spec.Profile):
			reason, note, _ := pol.SkipPod(pod, pb.Spec.Profile, nil)
			p.skipped = append(p.skipped, skippedPod{pod, reason, note})
		case len(p.inject) < room:
			p.inject = append(p.inject, pod)
		default:
			p.spare = append(p.spare, pod)
		}
	}
	return p
}

func hasEphemeralContainer(pod *corev1.Pod, name string) bool {
	return slices.ContainsFunc(pod.Spec.EphemeralContainers, func(c corev1.EphemeralContainer) bool { return c.Name == name })
}

// hasContainer reports whether the pod has a regular or init container (a
// sidecar is an init container) named name.
func hasContainer(pod *corev1.Pod, name string) bool {
	named := func(c corev1.Container) bool { return c.Name == name }
	return slices.ContainsFunc(pod.Spec.Containers, named) || slices.ContainsFunc(pod.Spec.InitContainers, named)
}

// skipsPod reports whether pol skips pod for what its spec shows; the
// volumes its claims are bound to are read before the container is added
// (claimedVolumes).
func skipsPod(pol policy.Policy, pod *corev1.Pod, profile debugv1beta1.Profile) bool {
	_, _, skip := pol.SkipPod(pod, profile, nil)
	return skip
}
