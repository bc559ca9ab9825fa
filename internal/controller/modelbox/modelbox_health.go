package modelbox

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	"github.com/deckhand-dev/deckhand/internal/status"
)

// health judges a ModelBox from the rest of its computed status st: ready
// once its Deployment has rolled out and is available; stalled while
// Degraded (its children cannot be applied, or the Deployment's rollout
// passed its progress deadline or cannot make pods), which only a change
// by someone ends.
func health(st *modelv1.ModelBoxStatus) status.Health {
	degraded := meta.FindStatusCondition(st.Conditions, modelv1.ConditionDegraded)
	progressing := meta.FindStatusCondition(st.Conditions, modelv1.ConditionProgressing)
	available := meta.FindStatusCondition(st.Conditions, modelv1.ConditionAvailable)
	switch {
	case degraded != nil && degraded.Status == "True":
		return status.Health{Stalled: true, Reason: degraded.Reason, Message: degraded.Message}
	case available == nil || available.Status != "True":
		return status.Health{Reason: reasonOf(available), Message: messageOf(available)}
	case progressing == nil || progressing.Status != "False":
		return status.Health{Reason: reasonOf(progressing), Message: messageOf(progressing)}
	}
	return status.Health{Ready: true, Reason: progressing.Reason, Message: available.Message}
}

func reasonOf(c *metav1.Condition) string {
	if c == nil {
		return modelv1.ReasonRollingOut
	}
	return c.Reason
}

func messageOf(c *metav1.Condition) string {
	if c == nil {
		return "waiting for the Deployment"
	}
	return c.Message
}
