package policy

import (
	"slices"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

// Triggers is pb's triggers: [Running] when it names none (the behaviour
// before triggers existed, and a PodBugger written as v1alpha1).
func Triggers(pb *debugv1beta1.PodBugger) []debugv1beta1.Trigger {
	if len(pb.Spec.Triggers) == 0 {
		return []debugv1beta1.Trigger{debugv1beta1.TriggerRunning}
	}
	return pb.Spec.Triggers
}

// InjectsRunning reports whether pb adds its container to every running pod.
func InjectsRunning(pb *debugv1beta1.PodBugger) bool {
	return slices.Contains(Triggers(pb), debugv1beta1.TriggerRunning)
}

// Records reports whether pb has a failure trigger, and so records incidents.
func Records(pb *debugv1beta1.PodBugger) bool {
	return slices.ContainsFunc(Triggers(pb), func(t debugv1beta1.Trigger) bool { return t != debugv1beta1.TriggerRunning })
}

// InjectsOnIncident reports whether a failing pod gets pb's container.
func InjectsOnIncident(pb *debugv1beta1.PodBugger) bool {
	return Records(pb) && pb.Spec.Incidents != nil && pb.Spec.Incidents.Inject
}

// Injects reports whether pb ever adds a container to a pod. One that does
// not only records incidents, which reads what the failing pod's readers
// can read and changes no pod: it needs no namespace opt-in.
func Injects(pb *debugv1beta1.PodBugger) bool {
	return InjectsRunning(pb) || InjectsOnIncident(pb)
}
