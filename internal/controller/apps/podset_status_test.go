package apps

import (
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/deckhand-dev/deckhand/api/apps/v1alpha1"
)

func testSet(size int32, conds ...metav1.Condition) *appsv1alpha1.PodSet {
	return &appsv1alpha1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Generation: 7},
		Spec:       appsv1alpha1.PodSetSpec{Size: size},
		Status:     appsv1alpha1.PodSetStatus{Conditions: conds},
	}
}

func TestCalculateStatus(t *testing.T) {
	now := metav1.NewTime(t0.Add(time.Hour))
	quota := &syncFailure{reason: appsv1alpha1.ReasonFailedCreate, err: errors.New("exceeded quota")}
	type cond struct {
		status metav1.ConditionStatus
		reason string
	}
	tests := map[string]struct {
		set     *appsv1alpha1.PodSet
		pods    []*corev1.Pod
		synced  bool
		failure *syncFailure

		wantNodes                               []string
		wantReplicas, wantReady, wantUpdated    int32
		wantAvailable, wantProgressing, wantRep cond // wantRep.status "" means no ReplicaFailure
	}{
		"empty set of size 0 is done": {
			set: testSet(0), synced: true,
			wantAvailable:   cond{metav1.ConditionTrue, appsv1alpha1.ReasonMinimumReplicasAvailable},
			wantProgressing: cond{metav1.ConditionFalse, appsv1alpha1.ReasonUpToDate},
		},
		"scaling up, nothing ready": {
			set: testSet(3), synced: true,
			pods:      []*corev1.Pod{testPod("web-b", pending), testPod("web-a", pending)},
			wantNodes: []string{"web-a", "web-b"}, wantReplicas: 2, wantUpdated: 2,
			wantAvailable:   cond{metav1.ConditionFalse, appsv1alpha1.ReasonMinimumReplicasUnavailable},
			wantProgressing: cond{metav1.ConditionTrue, appsv1alpha1.ReasonScalingUp},
		},
		"finished and terminating pods do not count": {
			set: testSet(2), synced: true,
			pods: []*corev1.Pod{testPod("web-a", ready), testPod("web-b", ready), testPod("web-c", ready, terminating),
				testPod("web-d", succeeded), testPod("web-e", failed)},
			wantNodes: []string{"web-a", "web-b"}, wantReplicas: 2, wantReady: 2, wantUpdated: 2,
			wantAvailable:   cond{metav1.ConditionTrue, appsv1alpha1.ReasonMinimumReplicasAvailable},
			wantProgressing: cond{metav1.ConditionFalse, appsv1alpha1.ReasonUpToDate},
		},
		"one unready of three is still available with maxUnavailable 1": {
			set: testSet(3), synced: true,
			pods:      []*corev1.Pod{testPod("web-a", ready), testPod("web-b", ready), testPod("web-c")},
			wantNodes: []string{"web-a", "web-b", "web-c"}, wantReplicas: 3, wantReady: 2, wantUpdated: 3,
			wantAvailable:   cond{metav1.ConditionTrue, appsv1alpha1.ReasonMinimumReplicasAvailable},
			wantProgressing: cond{metav1.ConditionTrue, appsv1alpha1.ReasonWaitingForReady},
		},
		"scaling down": {
			set: testSet(1), synced: true,
			pods:      []*corev1.Pod{testPod("web-a", ready), testPod("web-b", ready)},
			wantNodes: []string{"web-a", "web-b"}, wantReplicas: 2, wantReady: 2, wantUpdated: 2,
			wantAvailable:   cond{metav1.ConditionTrue, appsv1alpha1.ReasonMinimumReplicasAvailable},
			wantProgressing: cond{metav1.ConditionTrue, appsv1alpha1.ReasonScalingDown},
		},
		"rolling out": {
			set: testSet(2), synced: true,
			pods:      []*corev1.Pod{testPod("web-a", ready, outdated), testPod("web-b", ready)},
			wantNodes: []string{"web-a", "web-b"}, wantReplicas: 2, wantReady: 2, wantUpdated: 1,
			wantAvailable:   cond{metav1.ConditionTrue, appsv1alpha1.ReasonMinimumReplicasAvailable},
			wantProgressing: cond{metav1.ConditionTrue, appsv1alpha1.ReasonUpdating},
		},
		"a failed creation is reported": {
			set: testSet(2), synced: true, failure: quota,
			wantAvailable:   cond{metav1.ConditionFalse, appsv1alpha1.ReasonMinimumReplicasUnavailable},
			wantProgressing: cond{metav1.ConditionTrue, appsv1alpha1.ReasonScalingUp},
			wantRep:         cond{metav1.ConditionTrue, appsv1alpha1.ReasonFailedCreate},
		},
		"the failure stays while the controller waits for its cache": {
			set: testSet(2, metav1.Condition{Type: appsv1alpha1.ConditionReplicaFailure, Status: metav1.ConditionTrue,
				Reason: appsv1alpha1.ReasonFailedCreate, LastTransitionTime: metav1.NewTime(t0), ObservedGeneration: 7}),
			synced:          false,
			wantAvailable:   cond{metav1.ConditionFalse, appsv1alpha1.ReasonMinimumReplicasUnavailable},
			wantProgressing: cond{metav1.ConditionTrue, appsv1alpha1.ReasonScalingUp},
			wantRep:         cond{metav1.ConditionTrue, appsv1alpha1.ReasonFailedCreate},
		},
		"the failure goes once a sync succeeds": {
			set: testSet(0, metav1.Condition{Type: appsv1alpha1.ConditionReplicaFailure, Status: metav1.ConditionTrue,
				Reason: appsv1alpha1.ReasonFailedCreate, LastTransitionTime: metav1.NewTime(t0)}),
			synced:          true,
			wantAvailable:   cond{metav1.ConditionTrue, appsv1alpha1.ReasonMinimumReplicasAvailable},
			wantProgressing: cond{metav1.ConditionFalse, appsv1alpha1.ReasonUpToDate},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := tc.set.DeepCopy()
			st := calculateStatus(tc.set, tc.pods, "new", tc.synced, tc.failure, now)
			if !slices.Equal(st.Nodes, tc.wantNodes) {
				t.Errorf("nodes = %v, want %v", st.Nodes, tc.wantNodes)
			}
			if st.Replicas != tc.wantReplicas || st.ReadyReplicas != tc.wantReady || st.AvailableReplicas != tc.wantReady || st.UpdatedReplicas != tc.wantUpdated {
				t.Errorf("replicas/ready/available/updated = %d/%d/%d/%d, want %d/%d/%d/%d", st.Replicas, st.ReadyReplicas,
					st.AvailableReplicas, st.UpdatedReplicas, tc.wantReplicas, tc.wantReady, tc.wantReady, tc.wantUpdated)
			}
			if st.Selector != "apps.deckhand.dev/podset=web" || st.ObservedGeneration != 7 {
				t.Errorf("selector %q, observedGeneration %d", st.Selector, st.ObservedGeneration)
			}
			check := func(typ string, want cond) {
				t.Helper()
				c := meta.FindStatusCondition(st.Conditions, typ)
				if want.status == "" {
					if c != nil {
						t.Errorf("%s = %+v, want none", typ, c)
					}
					return
				}
				if c == nil || c.Status != want.status || c.Reason != want.reason || c.ObservedGeneration != 7 {
					t.Errorf("%s = %+v, want %s/%s", typ, c, want.status, want.reason)
				}
			}
			check(appsv1alpha1.ConditionAvailable, tc.wantAvailable)
			check(appsv1alpha1.ConditionProgressing, tc.wantProgressing)
			check(appsv1alpha1.ConditionReplicaFailure, tc.wantRep)
			if !equalSets(before, tc.set) {
				t.Errorf("calculateStatus changed its input")
			}
		})
	}
}

func TestCalculateStatusKeepsTransitionTimes(t *testing.T) {
	set := testSet(1)
	pods := []*corev1.Pod{testPod("web-a", ready)}
	first := calculateStatus(set, pods, "new", true, nil, metav1.NewTime(t0))
	set.Status = first
	second := calculateStatus(set, pods, "new", true, nil, metav1.NewTime(t0.Add(time.Hour)))
	if c := meta.FindStatusCondition(second.Conditions, appsv1alpha1.ConditionAvailable); !c.LastTransitionTime.Equal(&metav1.Time{Time: t0}) {
		t.Errorf("unchanged Available moved its transition time to %v", c.LastTransitionTime)
	}
	if !equalStatus(first, second) {
		t.Errorf("the same observation gave a different status:\n%+v\n%+v", first, second)
	}
}

func equalSets(a, b *appsv1alpha1.PodSet) bool {
	return equality.Semantic.DeepEqual(a, b)
}

func equalStatus(a, b appsv1alpha1.PodSetStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}
