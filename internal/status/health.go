package status

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The health contract every kind's status keeps for the tools that gate on
// it (docs/operations/gitops.md): kubectl wait --for=condition=Ready, kstatus (Flux,
// kpt, cli-utils) and Argo CD's health check (config/argocd/health.lua).
const (
	// ConditionReady is True when the object is settled and doing what its
	// spec asks (a suspended object is settled: reason Suspended), False
	// while it converges or when it is stalled.
	ConditionReady = "Ready"
	// ConditionStalled is True when the object cannot progress until
	// someone changes something (its spec, a quota, a namespace label):
	// kstatus reads it as Failed, Argo CD as Degraded.
	ConditionStalled = "Stalled"

	// ReasonSuspended is Ready's reason for an object its spec suspends.
	ReasonSuspended = "Suspended"
	// ReasonNotStalled is Stalled's reason when it is False.
	ReasonNotStalled = "Progressing"
)

// Health is a kind's judgement of one object, which SetHealth turns into
// its Ready and Stalled conditions.
type Health struct {
	// Ready says whether the object is settled; Reason and Message say
	// why, or what it waits for.
	Ready           bool
	Reason, Message string
	// Stalled says the object cannot progress without a change by
	// someone; Ready is then False with the same reason and message.
	Stalled bool
}

// SetHealth sets the Ready and Stalled conditions of a status at
// generation from h.
func SetHealth(conds *[]metav1.Condition, generation int64, h Health, now metav1.Time) {
	ready := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: h.Reason, Message: h.Message, ObservedGeneration: generation}
	stalled := metav1.Condition{Type: ConditionStalled, Status: metav1.ConditionFalse, Reason: ReasonNotStalled,
		Message: "nothing stops it from converging", ObservedGeneration: generation}
	switch {
	case h.Stalled:
		stalled.Status, stalled.Reason, stalled.Message = metav1.ConditionTrue, h.Reason, h.Message
	case h.Ready:
		ready.Status = metav1.ConditionTrue
	}
	SetCondition(conds, ready, now)
	SetCondition(conds, stalled, now)
}
