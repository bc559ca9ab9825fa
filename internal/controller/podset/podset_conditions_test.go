package podset

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
)

// counts is a status with only the counts the condition functions read.
func counts(replicas, ready, available, updated int32) *appsv1beta1.PodSetStatus {
	return &appsv1beta1.PodSetStatus{Replicas: replicas, ReadyReplicas: ready, AvailableReplicas: available, UpdatedReplicas: updated}
}

// conditionCase is one case of a condition function: a set of size pods
// with the counts of st, and the condition it should get.
type conditionCase struct {
	size       int32
	st         *appsv1beta1.PodSetStatus
	wantStatus metav1.ConditionStatus
	wantReason string
	wantMsg    string
}

// testCondition runs fn, which computes the condition of type typ, on each case.
func testCondition(t *testing.T, typ string, fn func(*appsv1beta1.PodSet, *appsv1beta1.PodSetStatus) metav1.Condition, tests map[string]conditionCase) {
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := fn(testSet(tc.size), tc.st)
			if c.Type != typ || c.Status != tc.wantStatus || c.Reason != tc.wantReason || c.Message != tc.wantMsg {
				t.Errorf("got %s/%s/%s %q, want %s/%s/%s %q", c.Type, c.Status, c.Reason, c.Message, typ, tc.wantStatus, tc.wantReason, tc.wantMsg)
			}
		})
	}
}

func TestAvailableCondition(t *testing.T) {
	testCondition(t, appsv1beta1.ConditionAvailable, availableCondition, map[string]conditionCase{
		"size 0 is available": {0, counts(0, 0, 0, 0), metav1.ConditionTrue, appsv1beta1.ReasonMinimumReplicasAvailable,
			"0 of 0 pods are available (at least 0 needed)"},
		"all but maxUnavailable (1) is enough": {3, counts(3, 2, 2, 3), metav1.ConditionTrue, appsv1beta1.ReasonMinimumReplicasAvailable,
			"2 of 3 pods are available (at least 2 needed)"},
		"fewer is not": {3, counts(3, 1, 1, 3), metav1.ConditionFalse, appsv1beta1.ReasonMinimumReplicasUnavailable,
			"1 of 3 pods are available (at least 2 needed)"},
		"a single pod may be missing": {1, counts(0, 0, 0, 0), metav1.ConditionTrue, appsv1beta1.ReasonMinimumReplicasAvailable,
			"0 of 1 pods are available (at least 0 needed)"},
	})
}

func TestProgressingCondition(t *testing.T) {
	testCondition(t, appsv1beta1.ConditionProgressing, progressingCondition, map[string]conditionCase{
		"too few pods":                      {3, counts(2, 2, 2, 2), metav1.ConditionTrue, appsv1beta1.ReasonScalingUp, "2 of 3 pods exist"},
		"too many pods, even outdated ones": {1, counts(2, 0, 0, 0), metav1.ConditionTrue, appsv1beta1.ReasonScalingDown, "2 pods exist, 1 wanted"},
		"outdated pods, even unready ones":  {2, counts(2, 0, 0, 1), metav1.ConditionTrue, appsv1beta1.ReasonUpdating, "1 of 2 pods run the current template"},
		"unready pods":                      {2, counts(2, 1, 1, 2), metav1.ConditionTrue, appsv1beta1.ReasonWaitingForReady, "1 of 2 pods are ready"},
		"there":                             {2, counts(2, 2, 0, 2), metav1.ConditionFalse, appsv1beta1.ReasonUpToDate, "all 2 pods run the current template and are ready"},
		"size 0, there":                     {0, counts(0, 0, 0, 0), metav1.ConditionFalse, appsv1beta1.ReasonUpToDate, "all 0 pods run the current template and are ready"},
	})
}

func TestReplicaFailureCondition(t *testing.T) {
	if c := replicaFailureCondition(nil); c != nil {
		t.Errorf("replicaFailureCondition(nil) = %+v, want none", c)
	}
	c := replicaFailureCondition(&syncFailure{reason: appsv1beta1.ReasonFailedDelete, err: errors.New("forbidden")})
	if c == nil || c.Type != appsv1beta1.ConditionReplicaFailure || c.Status != metav1.ConditionTrue ||
		c.Reason != appsv1beta1.ReasonFailedDelete || c.Message != "forbidden" {
		t.Errorf("replicaFailureCondition = %+v, want ReplicaFailure/True/FailedDelete \"forbidden\"", c)
	}
}

func TestCountPods(t *testing.T) {
	set := minReady(testSet(3), 3600)
	now := t0.Add(time.Hour)
	st := countPods(set, nil, "new", now)
	if st.Replicas != 0 || st.PodNames != nil {
		t.Errorf("no pods counted %+v", st)
	}
	st = countPods(set, podsForCount(), "new", now)
	if st.Replicas != 3 || st.ReadyReplicas != 2 || st.AvailableReplicas != 1 || st.UpdatedReplicas != 2 || st.TerminatingReplicas != 1 {
		t.Errorf("replicas/ready/available/updated/terminating = %d/%d/%d/%d/%d, want 3/2/1/2/1",
			st.Replicas, st.ReadyReplicas, st.AvailableReplicas, st.UpdatedReplicas, st.TerminatingReplicas)
	}
	if want := []string{"web-a", "web-b", "web-c"}; len(st.PodNames) != 3 || st.PodNames[0] != want[0] || st.PodNames[2] != want[2] {
		t.Errorf("pod names %v, want %v (sorted, active only)", st.PodNames, want)
	}
	if st.Conditions != nil || st.ObservedGeneration != 0 || st.Selector != "" {
		t.Errorf("countPods set more than counts: %+v", st)
	}
}

// podsForCount are three active pods (web-c ready for an hour but outdated,
// web-a ready for half an hour, web-b pending), one terminating, one
// finished and one both (not counted as terminating), given out of order.
func podsForCount() []*corev1.Pod {
	return []*corev1.Pod{testPod("web-c", ready, outdated), testPod("web-a", readySince(30*time.Minute)), testPod("web-b", pending),
		testPod("web-d", ready, terminating), testPod("web-e", succeeded), testPod("web-f", failed, terminating)}
}

func TestUrgentStatus(t *testing.T) {
	set := testSet(2)
	cond := func(reason, msg string) []metav1.Condition {
		return []metav1.Condition{{Type: appsv1beta1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: reason, Message: msg}}
	}
	held := appsv1beta1.PodSetStatus{ObservedGeneration: 7, Replicas: 1, Conditions: cond(appsv1beta1.ReasonScalingUp, "1 of 2 pods exist")}
	tests := map[string]struct {
		want   appsv1beta1.PodSetStatus
		urgent bool
	}{
		"a count":        {appsv1beta1.PodSetStatus{ObservedGeneration: 7, Replicas: 2, Conditions: cond(appsv1beta1.ReasonScalingUp, "1 of 2 pods exist")}, false},
		"only a message": {appsv1beta1.PodSetStatus{ObservedGeneration: 7, Replicas: 1, Conditions: cond(appsv1beta1.ReasonScalingUp, "2 of 2 pods exist")}, false},
		"a generation":   {appsv1beta1.PodSetStatus{ObservedGeneration: 8, Replicas: 1, Conditions: held.Conditions}, true},
		// ScalingUp, then WaitingForReady: a step of the way, paced like
		// the counts that make it.
		"a step of the way": {appsv1beta1.PodSetStatus{ObservedGeneration: 7, Replicas: 2, Conditions: cond(appsv1beta1.ReasonWaitingForReady, "")}, false},
		"arrived, not all available": {appsv1beta1.PodSetStatus{ObservedGeneration: 7, Replicas: 2, Conditions: []metav1.Condition{{
			Type: appsv1beta1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: appsv1beta1.ReasonUpToDate}}}, true},
		"a condition appears": {appsv1beta1.PodSetStatus{ObservedGeneration: 7, Replicas: 1, Conditions: append(cond(appsv1beta1.ReasonScalingUp, ""),
			metav1.Condition{Type: appsv1beta1.ConditionReplicaFailure, Status: metav1.ConditionTrue, Reason: appsv1beta1.ReasonFailedCreate})}, true},
		"settled": {appsv1beta1.PodSetStatus{ObservedGeneration: 7, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2,
			Conditions: held.Conditions}, true},
		"settled but a pod terminating": {appsv1beta1.PodSetStatus{ObservedGeneration: 7, Replicas: 2, UpdatedReplicas: 2,
			AvailableReplicas: 2, TerminatingReplicas: 1, Conditions: held.Conditions}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := urgentStatus(set, &held, &tc.want); got != tc.urgent {
				t.Errorf("urgentStatus = %v, want %v", got, tc.urgent)
			}
		})
	}
}
