package modelbox

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
)

func TestComputeStatus(t *testing.T) {
	box := &modelv1.ModelBox{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 3},
		Spec:       modelv1.ModelBoxSpec{Ports: []modelv1.ServicePort{{Port: 80}}},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.0.0.7",
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30010}, {Name: "x", Port: 81}}},
	}
	deploy := func(want, replicas, updated, available int32, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Generation: 2},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(want)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: replicas, UpdatedReplicas: updated,
				ReadyReplicas: available, AvailableReplicas: available, Conditions: conds},
		}
	}
	available := appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}
	unavailable := appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse}
	stuck := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
		Reason: "ProgressDeadlineExceeded", Message: "ReplicaSet web-1 has timed out progressing."}

	now := metav1.NewTime(time.Date(2026, 11, 21, 4, 0, 0, 0, time.UTC))
	cond := func(typ string, st metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg, ObservedGeneration: 3, LastTransitionTime: now}
	}
	const (
		T = metav1.ConditionTrue
		F = metav1.ConditionFalse
	)
	asExpected := cond(modelv1.ConditionDegraded, F, modelv1.ReasonAsExpected, "the children match the spec")
	fromChildren := func(replicas, updated, available int32, conds ...metav1.Condition) modelv1.ModelBoxStatus {
		return modelv1.ModelBoxStatus{ObservedGeneration: 3, Replicas: replicas, UpdatedReplicas: updated,
			ReadyReplicas: available, AvailableReplicas: available,
			ServiceName: "web", ServiceType: corev1.ServiceTypeNodePort, ClusterIP: "10.0.0.7",
			NodePorts: []modelv1.NodePort{{Name: "http", Port: 80, NodePort: 30010}}, Conditions: conds}
	}
	avail := func(st metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return cond(modelv1.ConditionAvailable, st, reason, msg)
	}
	rollingOut := func(msg string) metav1.Condition {
		return cond(modelv1.ConditionProgressing, T, modelv1.ReasonRollingOut, msg)
	}
	allUp := avail(T, modelv1.ReasonMinimumReplicasAvailable, "4 of 4 pods available")
	done := cond(modelv1.ConditionProgressing, F, modelv1.ReasonRolloutComplete, "4 of 4 pods updated, 4 available, 4 in total")
	tests := map[string]struct {
		obs     observed
		syncErr error
		want    modelv1.ModelBoxStatus
	}{
		"nothing yet": {want: modelv1.ModelBoxStatus{ObservedGeneration: 3, Conditions: []metav1.Condition{
			avail(F, modelv1.ReasonDeploymentMissing, "the Deployment does not exist yet"), rollingOut("creating the Deployment"), asExpected}}},
		"no Service yet": {obs: observed{deployment: deploy(4, 4, 4, 4, available)},
			want: modelv1.ModelBoxStatus{ObservedGeneration: 3, Replicas: 4, UpdatedReplicas: 4, ReadyReplicas: 4, AvailableReplicas: 4,
				Conditions: []metav1.Condition{avail(F, modelv1.ReasonServiceMissing, "the Service does not exist yet"), done, asExpected}}},
		"all available": {obs: observed{deployment: deploy(4, 4, 4, 4, available), service: svc},
			want: fromChildren(4, 4, 4, allUp, done, asExpected)},
		"rolling out: old pods remain": {obs: observed{deployment: deploy(4, 5, 2, 4, available), service: svc},
			want: fromChildren(5, 2, 4, allUp, rollingOut("2 of 4 pods updated, 4 available, 5 in total"), asExpected)},
		"scaling up": {obs: observed{deployment: deploy(4, 2, 2, 2, unavailable), service: svc},
			want: fromChildren(2, 2, 2, avail(F, modelv1.ReasonReplicasUnavailable, "2 of 4 pods available"),
				rollingOut("2 of 4 pods updated, 2 available, 2 in total"), asExpected)},
		"stuck rollout": {obs: observed{deployment: deploy(4, 5, 1, 4, available, stuck), service: svc},
			want: fromChildren(5, 1, 4, allUp, rollingOut("1 of 4 pods updated, 4 available, 5 in total"),
				cond(modelv1.ConditionDegraded, T, modelv1.ReasonProgressDeadlineExceeded, stuck.Message))},
		"apply failed": {obs: observed{deployment: deploy(4, 4, 4, 4, available), service: svc},
			syncErr: errors.New("applying Service: port is already allocated"),
			want: fromChildren(4, 4, 4, allUp, done,
				cond(modelv1.ConditionDegraded, T, modelv1.ReasonApplyFailed, "applying Service: port is already allocated"))},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := computeStatus(box, tt.obs, tt.syncErr, now); !equality.Semantic.DeepEqual(got, tt.want) {
				t.Errorf("status differs (-want +got):\n%s", cmp.Diff(tt.want, got))
			}
		})
	}

	t.Run("an unchanged condition keeps its transition time", func(t *testing.T) {
		obs := observed{deployment: deploy(4, 4, 4, 4, available), service: svc}
		first := computeStatus(box, obs, nil, now)
		again := box.DeepCopy()
		again.Status = first
		later := metav1.NewTime(now.Add(time.Hour))
		if second := computeStatus(again, obs, nil, later); !equality.Semantic.DeepEqual(first, second) {
			t.Errorf("a status computed twice from the same children changed (-first +second):\n%s", cmp.Diff(first, second))
		}
		third := computeStatus(again, observed{deployment: deploy(4, 4, 4, 4, unavailable), service: svc}, nil, later)
		want := fromChildren(4, 4, 4, avail(F, modelv1.ReasonReplicasUnavailable, "4 of 4 pods available"), done, asExpected)
		want.Conditions[0].LastTransitionTime = later
		if !equality.Semantic.DeepEqual(third, want) {
			t.Errorf("status differs (-want +got):\n%s", cmp.Diff(want, third))
		}
	})
}

func TestUrgentStatus(t *testing.T) {
	available := metav1.Condition{Type: modelv1.ConditionAvailable, Status: metav1.ConditionFalse, Reason: modelv1.ReasonReplicasUnavailable, Message: "0 of 3 available"}
	held := modelv1.ModelBoxStatus{ObservedGeneration: 2, Replicas: 3, ServiceName: "m", Conditions: []metav1.Condition{available}}
	changed := func(f func(st *modelv1.ModelBoxStatus)) modelv1.ModelBoxStatus {
		st := held
		st.Conditions = slices.Clone(held.Conditions)
		f(&st)
		return st
	}
	for name, tc := range map[string]struct {
		want   modelv1.ModelBoxStatus
		urgent bool
	}{
		"a replica ready":         {changed(func(st *modelv1.ModelBoxStatus) { st.ReadyReplicas = 1; st.UpdatedReplicas = 3 }), false},
		"only a message":          {changed(func(st *modelv1.ModelBoxStatus) { st.Conditions[0].Message = "1 of 3 available" }), false},
		"a condition's reason":    {changed(func(st *modelv1.ModelBoxStatus) { st.Conditions[0].Reason = modelv1.ReasonDeploymentMissing }), true},
		"a condition's status":    {changed(func(st *modelv1.ModelBoxStatus) { st.Conditions[0].Status = metav1.ConditionTrue }), true},
		"a new generation":        {changed(func(st *modelv1.ModelBoxStatus) { st.ObservedGeneration = 3 }), true},
		"the Service's address":   {changed(func(st *modelv1.ModelBoxStatus) { st.ClusterIP = "10.0.0.1" }), true},
		"every replica available": {changed(func(st *modelv1.ModelBoxStatus) { st.ReadyReplicas, st.UpdatedReplicas, st.AvailableReplicas = 3, 3, 3 }), true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := urgentStatus(&held, &tc.want); got != tc.urgent {
				t.Errorf("urgentStatus = %v, want %v", got, tc.urgent)
			}
		})
	}
}
