package podbugger

import (
	"fmt"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
	"github.com/deckhand-dev/deckhand/internal/status"
)

// health judges a PodBugger: stalled while a safety rule stops it (the
// namespace's opt-in, the allow-list, the profile rules) or the apiserver
// refused a pod's container as often as the controller tries; converging
// while an injection failed in a way a retry may mend; otherwise settled
// (suspended, at spec.maxPods, or injecting).
func health(pb *debugv1beta1.PodBugger, o observation, installed int32) status.Health {
	switch {
	case len(o.violations) > 0:
		return status.Health{Stalled: true, Reason: o.violations[0].Reason, Message: "blocked: " + o.violations[0].Err.Error()}
	case o.injectErr != nil:
		return status.Health{Reason: debugv1beta1.ReasonInjectionFailed, Message: o.injectErr.Error()}
	case len(o.refused) > 0:
		return status.Health{Stalled: exhausted(o.refused), Reason: debugv1beta1.ReasonInjectionFailed, Message: refusedMessage(o.refused)}
	case !policy.Injects(pb):
		return status.Health{Ready: true, Reason: debugv1beta1.ReasonCaptureOnly,
			Message: "records the failures of matching pods as PodIncidents; adds no container to any pod"}
	case pb.Spec.Suspend:
		return status.Health{Ready: true, Reason: debugv1beta1.ReasonSuspended, Message: "suspended: no new pod gets the container"}
	case installed >= pb.Spec.MaxPods:
		return status.Health{Ready: true, Reason: debugv1beta1.ReasonMaxPodsReached,
			Message: fmt.Sprintf("%d pods carry the container, the most spec.maxPods allows", installed)}
	}
	return status.Health{Ready: true, Reason: debugv1beta1.ReasonActive, Message: "matching running pods get the container"}
}

// exhausted says whether every refused pod is past its last attempt.
func exhausted(refused []refusal) bool {
	for _, f := range refused {
		if f.attempts < maxAttempts {
			return false
		}
	}
	return true
}
