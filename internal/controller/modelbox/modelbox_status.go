package modelbox

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	"github.com/deckhand-dev/deckhand/internal/status"
)

// maxMessage bounds a condition message well under the API's 32 KiB.
const maxMessage = 1024

// computeStatus computes box's status from its children and the error, if any,
// that making them match the spec ended with. now stamps conditions that
// change. It is pure: the same arguments give the same status.
func computeStatus(box *modelv1.ModelBox, obs observed, syncErr error, now metav1.Time) modelv1.ModelBoxStatus {
	st := modelv1.ModelBoxStatus{
		ObservedGeneration: box.Generation,
		Conditions:         append([]metav1.Condition(nil), box.Status.Conditions...),
	}
	if d := obs.deployment; d != nil {
		st.Replicas = d.Status.Replicas
		st.ReadyReplicas = d.Status.ReadyReplicas
		st.UpdatedReplicas = d.Status.UpdatedReplicas
		st.AvailableReplicas = d.Status.AvailableReplicas
	}
	if s := obs.service; s != nil {
		st.ServiceName = s.Name
		st.ServiceType = s.Spec.Type
		st.ClusterIP = s.Spec.ClusterIP
		for _, p := range s.Spec.Ports {
			if p.NodePort != 0 {
				st.NodePorts = append(st.NodePorts, modelv1.NodePort{Name: p.Name, Port: p.Port, NodePort: p.NodePort})
			}
		}
	}
	for _, c := range []metav1.Condition{
		availableCondition(box, obs),
		progressingCondition(obs),
		degradedCondition(obs, syncErr),
	} {
		c.ObservedGeneration = box.Generation
		status.SetCondition(&st.Conditions, c, now)
	}
	return st
}

func availableCondition(box *modelv1.ModelBox, obs observed) metav1.Condition {
	d := obs.deployment
	switch {
	case d == nil:
		return metav1.Condition{Type: modelv1.ConditionAvailable, Status: metav1.ConditionFalse,
			Reason: modelv1.ReasonDeploymentMissing, Message: "the Deployment does not exist yet"}
	case obs.service == nil && len(box.Spec.Ports) > 0:
		return metav1.Condition{Type: modelv1.ConditionAvailable, Status: metav1.ConditionFalse,
			Reason: modelv1.ReasonServiceMissing, Message: "the Service does not exist yet"}
	}
	msg := fmt.Sprintf("%d of %d pods available", d.Status.AvailableReplicas, desiredReplicas(d))
	if c := deploymentCondition(d, appsv1.DeploymentAvailable); c != nil && c.Status == corev1.ConditionTrue {
		return metav1.Condition{Type: modelv1.ConditionAvailable, Status: metav1.ConditionTrue,
			Reason: modelv1.ReasonMinimumReplicasAvailable, Message: msg}
	}
	return metav1.Condition{Type: modelv1.ConditionAvailable, Status: metav1.ConditionFalse,
		Reason: modelv1.ReasonReplicasUnavailable, Message: msg}
}

func progressingCondition(obs observed) metav1.Condition {
	d := obs.deployment
	if d == nil {
		return metav1.Condition{Type: modelv1.ConditionProgressing, Status: metav1.ConditionTrue,
			Reason: modelv1.ReasonRollingOut, Message: "creating the Deployment"}
	}
	want := desiredReplicas(d)
	s := d.Status
	msg := fmt.Sprintf("%d of %d pods updated, %d available, %d in total", s.UpdatedReplicas, want, s.AvailableReplicas, s.Replicas)
	if d.Status.ObservedGeneration < d.Generation || s.UpdatedReplicas < want || s.Replicas > s.UpdatedReplicas || s.AvailableReplicas < s.UpdatedReplicas {
		return metav1.Condition{Type: modelv1.ConditionProgressing, Status: metav1.ConditionTrue,
			Reason: modelv1.ReasonRollingOut, Message: msg}
	}
	return metav1.Condition{Type: modelv1.ConditionProgressing, Status: metav1.ConditionFalse,
		Reason: modelv1.ReasonRolloutComplete, Message: msg}
}

func degradedCondition(obs observed, syncErr error) metav1.Condition {
	if syncErr != nil {
		return metav1.Condition{Type: modelv1.ConditionDegraded, Status: metav1.ConditionTrue,
			Reason: modelv1.ReasonApplyFailed, Message: truncate(syncErr.Error())}
	}
	if d := obs.deployment; d != nil {
		if c := deploymentCondition(d, appsv1.DeploymentProgressing); c != nil && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			return metav1.Condition{Type: modelv1.ConditionDegraded, Status: metav1.ConditionTrue,
				Reason: modelv1.ReasonProgressDeadlineExceeded, Message: truncate(c.Message)}
		}
		if c := deploymentCondition(d, appsv1.DeploymentReplicaFailure); c != nil && c.Status == corev1.ConditionTrue {
			return metav1.Condition{Type: modelv1.ConditionDegraded, Status: metav1.ConditionTrue,
				Reason: modelv1.ReasonReplicaFailure, Message: truncate(c.Message)}
		}
	}
	return metav1.Condition{Type: modelv1.ConditionDegraded, Status: metav1.ConditionFalse,
		Reason: modelv1.ReasonAsExpected, Message: "the children match the spec"}
}

func deploymentCondition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == t {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

func desiredReplicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas != nil {
		return *d.Spec.Replicas
	}
	return 1
}

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return s[:maxMessage-3] + "..."
}

// statusInterval paces a ModelBox's status writes while its Deployment
// rolls out: each of the Deployment's own status updates (replicas created,
// updated, ready, available) would otherwise be a write, several for each
// ModelBox created. Changes a user waits on are written at once
// (urgentStatus); counts in between at most once per interval.
const statusInterval = time.Second

// urgentStatus says whether a ModelBox status change is written at once
// rather than paced: anything but the replica counts changed (the
// generation, the Service, a condition's status or reason: Available turning
// True, say), or the rollout has settled, every replica updated, ready and
// available.
func urgentStatus(held, want *modelv1.ModelBoxStatus) bool {
	return status.ConditionsChanged(held.Conditions, want.Conditions) ||
		!equality.Semantic.DeepEqual(withoutCounts(*held), withoutCounts(*want)) ||
		want.UpdatedReplicas == want.Replicas && want.ReadyReplicas == want.Replicas && want.AvailableReplicas == want.Replicas
}

// withoutCounts is st without its replica counts and conditions.
func withoutCounts(st modelv1.ModelBoxStatus) modelv1.ModelBoxStatus {
	st.Replicas, st.ReadyReplicas, st.UpdatedReplicas, st.AvailableReplicas = 0, 0, 0, 0
	st.Conditions = nil
	return st
}
