package model

import (
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
)

func TestStatusFor(t *testing.T) {
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

	type conds map[string]string // condition type -> "Status/Reason"
	tests := map[string]struct {
		obs     observed
		syncErr error
		want    conds
	}{
		"nothing yet": {
			want: conds{"Available": "False/DeploymentMissing", "Progressing": "True/RollingOut", "Degraded": "False/AsExpected"},
		},
		"no Service yet": {
			obs:  observed{deployment: deploy(4, 4, 4, 4, available)},
			want: conds{"Available": "False/ServiceMissing", "Progressing": "False/RolloutComplete", "Degraded": "False/AsExpected"},
		},
		"all available": {
			obs:  observed{deployment: deploy(4, 4, 4, 4, available), service: svc},
			want: conds{"Available": "True/MinimumReplicasAvailable", "Progressing": "False/RolloutComplete", "Degraded": "False/AsExpected"},
		},
		"rolling out: old pods remain": {
			obs:  observed{deployment: deploy(4, 5, 2, 4, available), service: svc},
			want: conds{"Available": "True/MinimumReplicasAvailable", "Progressing": "True/RollingOut", "Degraded": "False/AsExpected"},
		},
		"scaling up": {
			obs:  observed{deployment: deploy(4, 2, 2, 2, unavailable), service: svc},
			want: conds{"Available": "False/ReplicasUnavailable", "Progressing": "True/RollingOut", "Degraded": "False/AsExpected"},
		},
		"stuck rollout": {
			obs:  observed{deployment: deploy(4, 5, 1, 4, available, stuck), service: svc},
			want: conds{"Available": "True/MinimumReplicasAvailable", "Progressing": "True/RollingOut", "Degraded": "True/ProgressDeadlineExceeded"},
		},
		"apply failed": {
			obs:     observed{deployment: deploy(4, 4, 4, 4, available), service: svc},
			syncErr: errors.New("applying Service: port is already allocated"),
			want:    conds{"Available": "True/MinimumReplicasAvailable", "Progressing": "False/RolloutComplete", "Degraded": "True/ApplyFailed"},
		},
	}
	now := metav1.NewTime(time.Date(2026, 11, 21, 4, 0, 0, 0, time.UTC))
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			st := statusFor(box, tt.obs, tt.syncErr, now)
			got := conds{}
			for _, c := range st.Conditions {
				got[c.Type] = string(c.Status) + "/" + c.Reason
				if c.ObservedGeneration != 3 {
					t.Errorf("%s: observedGeneration %d, want 3", c.Type, c.ObservedGeneration)
				}
			}
			if len(got) != len(tt.want) {
				t.Errorf("conditions %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %s, want %s", k, got[k], v)
				}
			}
			if st.ObservedGeneration != 3 {
				t.Errorf("observedGeneration %d, want 3", st.ObservedGeneration)
			}
			if tt.syncErr != nil && meta.FindStatusCondition(st.Conditions, modelv1.ConditionDegraded).Message != tt.syncErr.Error() {
				t.Errorf("Degraded message does not carry the error")
			}
		})
	}

	t.Run("fields from the children", func(t *testing.T) {
		st := statusFor(box, observed{deployment: deploy(4, 5, 3, 2), service: svc}, nil, now)
		want := modelv1.ModelBoxStatus{Replicas: 5, UpdatedReplicas: 3, ReadyReplicas: 2, AvailableReplicas: 2,
			ServiceName: "web", ServiceType: corev1.ServiceTypeNodePort, ClusterIP: "10.0.0.7",
			NodePorts: []modelv1.NodePort{{Name: "http", Port: 80, NodePort: 30010}}}
		st.Conditions, st.ObservedGeneration = nil, 0
		if !equalStatus(st, want) {
			t.Errorf("status %+v, want %+v", st, want)
		}
	})

	t.Run("an unchanged condition keeps its transition time", func(t *testing.T) {
		obs := observed{deployment: deploy(4, 4, 4, 4, available), service: svc}
		first := statusFor(box, obs, nil, now)
		again := box.DeepCopy()
		again.Status = first
		later := metav1.NewTime(now.Add(time.Hour))
		second := statusFor(again, obs, nil, later)
		if !equalStatus(first, second) {
			t.Errorf("a status computed twice from the same children changed:\n%+v\n%+v", first, second)
		}
		third := statusFor(again, observed{deployment: deploy(4, 4, 4, 4, unavailable), service: svc}, nil, later)
		if c := meta.FindStatusCondition(third.Conditions, modelv1.ConditionAvailable); !c.LastTransitionTime.Equal(&later) {
			t.Errorf("Available changed at %v, want %v", c.LastTransitionTime, later)
		}
	})
}

func equalStatus(a, b modelv1.ModelBoxStatus) bool { return equality.Semantic.DeepEqual(a, b) }
