package podset

import (
	"k8s.io/apimachinery/pkg/api/meta"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/status"
)

// health judges a PodSet from the rest of its computed status st: ready
// once every pod runs the current template, is available, and none is
// left over or terminating; stalled while its pods cannot be made or
// removed (ReplicaFailure: a quota, an admission webhook, a bad template),
// which only a change by someone ends.
func health(set *appsv1beta1.PodSet, st *appsv1beta1.PodSetStatus) status.Health {
	if c := meta.FindStatusCondition(st.Conditions, appsv1beta1.ConditionReplicaFailure); c != nil && c.Status == "True" {
		return status.Health{Stalled: true, Reason: c.Reason, Message: c.Message}
	}
	progressing := meta.FindStatusCondition(st.Conditions, appsv1beta1.ConditionProgressing)
	available := meta.FindStatusCondition(st.Conditions, appsv1beta1.ConditionAvailable)
	switch {
	case progressing != nil && progressing.Status == "True":
		return status.Health{Reason: progressing.Reason, Message: progressing.Message}
	case st.AvailableReplicas < set.Spec.Replicas:
		return status.Health{Reason: appsv1beta1.ReasonMinimumReplicasUnavailable, Message: available.Message}
	case st.TerminatingReplicas > 0:
		return status.Health{Reason: appsv1beta1.ReasonScalingDown, Message: "waiting for terminating pods to go"}
	}
	return status.Health{Ready: true, Reason: appsv1beta1.ReasonUpToDate, Message: progressing.Message}
}
