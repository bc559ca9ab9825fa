package podset

import (
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
)

func testSet(size int32, conds ...metav1.Condition) *appsv1beta1.PodSet {
	return &appsv1beta1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Generation: 7},
		Spec:       appsv1beta1.PodSetSpec{Replicas: size},
		Status:     appsv1beta1.PodSetStatus{Conditions: conds},
	}
}

func TestComputeStatus(t *testing.T) {
	now := metav1.NewTime(t0.Add(time.Hour))
	quota := &syncFailure{reason: appsv1beta1.ReasonFailedCreate, err: errors.New("exceeded quota")}
	type cond struct {
		status metav1.ConditionStatus
		reason string
	}
	tests := map[string]struct {
		set     *appsv1beta1.PodSet
		pods    []*corev1.Pod
		synced  bool
		failure *syncFailure

		wantNodes                               []string
		wantReplicas, wantReady, wantUpdated    int32
		wantTerminating                         int32
		wantAvailableN                          *int32 // when it differs from wantReady
		wantAvailable, wantProgressing, wantRep cond   // wantRep.status "" means no ReplicaFailure
	}{
		"empty set of size 0 is done": {
			set: testSet(0), synced: true,
			wantAvailable:   cond{metav1.ConditionTrue, appsv1beta1.ReasonMinimumReplicasAvailable},
			wantProgressing: cond{metav1.ConditionFalse, appsv1beta1.ReasonUpToDate},
		},
		"scaling up, nothing ready": {
			set: testSet(3), synced: true,
			pods:      []*corev1.Pod{testPod("web-b", pending), testPod("web-a", pending)},
			wantNodes: []string{"web-a", "web-b"}, wantReplicas: 2, wantUpdated: 2,
			wantAvailable:   cond{metav1.ConditionFalse, appsv1beta1.ReasonMinimumReplicasUnavailable},
			wantProgressing: cond{metav1.ConditionTrue, appsv1beta1.ReasonScalingUp},
		},
		"finished and terminating pods do not count": {
			set: testSet(2), synced: true,
			pods: []*corev1.Pod{testPod("web-a", ready), testPod("web-b", ready), testPod("web-c", ready, terminating),
				testPod("web-d", succeeded), testPod("web-e", failed)},
			wantNodes: []string{"web-a", "web-b"}, wantReplicas: 2, wantReady: 2, wantUpdated: 2, wantTerminating: 1,
			wantAvailable:   cond{metav1.ConditionTrue, appsv1beta1.ReasonMinimumReplicasAvailable},
			wantProgressing: cond{metav1.ConditionFalse, appsv1beta1.ReasonUpToDate},
		},
		"one unready of three is still available with maxUnavailable 1": {
			set: testSet(3), synced: true,
			pods:      []*corev1.Pod{testPod("web-a", ready), testPod("web-b", ready), testPod("web-c")},
			wantNodes: []string{"web-a", "web-b", "web-c"}, wantReplicas: 3, wantReady: 2, wantUpdated: 3,
			wantAvailable:   cond{metav1.ConditionTrue, appsv1beta1.ReasonMinimumReplicasAvailable},
			wantProgressing: cond{metav1.ConditionTrue, appsv1beta1.ReasonWaitingForReady},
		},
		"scaling down": {
			set: testSet(1), synced: true,
			pods:      []*corev1.Pod{testPod("web-a", ready), testPod("web-b", ready)},
			wantNodes: []string{"web-a", "web-b"}, wantReplicas: 2, wantReady: 2, wantUpdated: 2,
			wantAvailable:   cond{metav1.ConditionTrue, appsv1beta1.ReasonMinimumReplicasAvailable},
			wantProgressing: cond{metav1.ConditionTrue, appsv1beta1.ReasonScalingDown},
		},
		"rolling out": {
			set: testSet(2), synced: true,
			pods:      []*corev1.Pod{testPod("web-a", ready, outdated), testPod("web-b", ready)},
			wantNodes: []string{"web-a", "web-b"}, wantReplicas: 2, wantReady: 2, wantUpdated: 1,
			wantAvailable:   cond{metav1.ConditionTrue, appsv1beta1.ReasonMinimumReplicasAvailable},
			wantProgressing: cond{metav1.ConditionTrue, appsv1beta1.ReasonUpdating},
		},
		"a failed creation is reported": {
			set: testSet(2), synced: true, failure: quota,
			wantAvailable:   cond{metav1.ConditionFalse, appsv1beta1.ReasonMinimumReplicasUnavailable},
			wantProgressing: cond{metav1.ConditionTrue, appsv1beta1.ReasonScalingUp},
			wantRep:         cond{metav1.ConditionTrue, appsv1beta1.ReasonFailedCreate},
		},
		"the failure stays while the controller waits for its cache": {
			set: testSet(2, metav1.Condition{Type: appsv1beta1.ConditionReplicaFailure, Status: metav1.ConditionTrue,
				Reason: appsv1beta1.ReasonFailedCreate, LastTransitionTime: metav1.NewTime(t0), ObservedGeneration: 7}),
			synced:          false,
			wantAvailable:   cond{metav1.ConditionFalse, appsv1beta1.ReasonMinimumReplicasUnavailable},
			wantProgressing: cond{metav1.ConditionTrue, appsv1beta1.ReasonScalingUp},
			wantRep:         cond{metav1.ConditionTrue, appsv1beta1.ReasonFailedCreate},
		},
		"terminating pods are counted apart": {
			set: testSet(1), synced: true,
			pods:      []*corev1.Pod{testPod("web-a", ready), testPod("web-b", ready, terminating), testPod("web-c", failed, terminating)},
			wantNodes: []string{"web-a"}, wantReplicas: 1, wantReady: 1, wantUpdated: 1, wantTerminating: 1,
			wantAvailable:   cond{metav1.ConditionTrue, appsv1beta1.ReasonMinimumReplicasAvailable},
			wantProgressing: cond{metav1.ConditionFalse, appsv1beta1.ReasonUpToDate},
		},
		"ready is not yet available before minReadySeconds": {
			set: minReady(testSet(2), 3600), synced: true,
			// now is t0+1h: ready since t0 is available, since t0+30m not yet.
			pods:      []*corev1.Pod{testPod("web-a", readySince(0)), testPod("web-b", readySince(30*time.Minute))},
			wantNodes: []string{"web-a", "web-b"}, wantReplicas: 2, wantReady: 2, wantUpdated: 2, wantAvailableN: new(int32(1)),
			wantAvailable:   cond{metav1.ConditionTrue, appsv1beta1.ReasonMinimumReplicasAvailable},
			wantProgressing: cond{metav1.ConditionFalse, appsv1beta1.ReasonUpToDate},
		},
		"the failure goes once a sync succeeds": {
			set: testSet(0, metav1.Condition{Type: appsv1beta1.ConditionReplicaFailure, Status: metav1.ConditionTrue,
				Reason: appsv1beta1.ReasonFailedCreate, LastTransitionTime: metav1.NewTime(t0)}),
			synced:          true,
			wantAvailable:   cond{metav1.ConditionTrue, appsv1beta1.ReasonMinimumReplicasAvailable},
			wantProgressing: cond{metav1.ConditionFalse, appsv1beta1.ReasonUpToDate},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := tc.set.DeepCopy()
			st := computeStatus(tc.set, tc.pods, "new", tc.synced, tc.failure, now)
			if !slices.Equal(st.PodNames, tc.wantNodes) {
				t.Errorf("nodes = %v, want %v", st.PodNames, tc.wantNodes)
			}
			wantAvailable := tc.wantReady
			if tc.wantAvailableN != nil {
				wantAvailable = *tc.wantAvailableN
			}
			if st.Replicas != tc.wantReplicas || st.ReadyReplicas != tc.wantReady || st.AvailableReplicas != wantAvailable ||
				st.UpdatedReplicas != tc.wantUpdated || st.TerminatingReplicas != tc.wantTerminating {
				t.Errorf("replicas/ready/available/updated/terminating = %d/%d/%d/%d/%d, want %d/%d/%d/%d/%d", st.Replicas, st.ReadyReplicas,
					st.AvailableReplicas, st.UpdatedReplicas, st.TerminatingReplicas, tc.wantReplicas, tc.wantReady, wantAvailable, tc.wantUpdated, tc.wantTerminating)
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
			check(appsv1beta1.ConditionAvailable, tc.wantAvailable)
			check(appsv1beta1.ConditionProgressing, tc.wantProgressing)
			check(appsv1beta1.ConditionReplicaFailure, tc.wantRep)
			if !equalSets(before, tc.set) {
				t.Errorf("computeStatus changed its input")
			}
		})
	}
}

func minReady(set *appsv1beta1.PodSet, seconds int32) *appsv1beta1.PodSet {
	set.Spec.MinReadySeconds = seconds
	return set
}

func TestUntilAvailable(t *testing.T) {
	now := t0.Add(time.Hour)
	pods := []*corev1.Pod{testPod("a", readySince(0)), testPod("b", readySince(50*time.Minute)), testPod("c", readySince(40*time.Minute)), testPod("d")}
	if got := untilAvailable(pods, 3600, now); got != 40*time.Minute {
		t.Errorf("untilAvailable = %s, want 40m (pod c)", got)
	}
	if got := untilAvailable(pods, 0, now); got != 0 {
		t.Errorf("untilAvailable without minReadySeconds = %s, want 0", got)
	}
}

func TestComputeStatusKeepsTransitionTimes(t *testing.T) {
	set := testSet(1)
	pods := []*corev1.Pod{testPod("web-a", ready)}
	first := computeStatus(set, pods, "new", true, nil, metav1.NewTime(t0))
	set.Status = first
	second := computeStatus(set, pods, "new", true, nil, metav1.NewTime(t0.Add(time.Hour)))
	if c := meta.FindStatusCondition(second.Conditions, appsv1beta1.ConditionAvailable); !c.LastTransitionTime.Equal(&metav1.Time{Time: t0}) {
		t.Errorf("unchanged Available moved its transition time to %v", c.LastTransitionTime)
	}
	if !equalStatus(first, second) {
		t.Errorf("the same observation gave a different status:\n%+v\n%+v", first, second)
	}
}

func equalSets(a, b *appsv1beta1.PodSet) bool {
	return equality.Semantic.DeepEqual(a, b)
}

func equalStatus(a, b appsv1beta1.PodSetStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}

func TestProgressOnly(t *testing.T) {
	ref := metav1.OwnerReference{APIVersion: "apps.deckhand.dev/v1beta1", Kind: "PodSet", Name: "s", UID: "set", Controller: ptr.To(true)}
	base := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{appsv1beta1.PodSetLabel: "s"}, OwnerReferences: []metav1.OwnerReference{ref}}}
	changed := func(f func(p *corev1.Pod)) *corev1.Pod {
		p := base.DeepCopy()
		f(p)
		return p
	}
	for name, tc := range map[string]struct {
		cur  *corev1.Pod
		want bool
	}{
		"scheduled": {changed(func(p *corev1.Pod) { p.Spec.NodeName = "n" }), true},
		"running and ready": {changed(func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}), true},
		"being deleted":  {changed(func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }), false},
		"succeeded":      {changed(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), false},
		"failed":         {changed(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), false},
		"relabelled":     {changed(func(p *corev1.Pod) { p.Labels[appsv1beta1.PodSetLabel] = "other" }), false},
		"label added":    {changed(func(p *corev1.Pod) { p.Labels["pulled"] = "true" }), false},
		"released":       {changed(func(p *corev1.Pod) { p.OwnerReferences = nil }), false},
		"owner replaced": {changed(func(p *corev1.Pod) { p.OwnerReferences[0].UID = "other" }), false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := progressOnly(base, tc.cur); got != tc.want {
				t.Errorf("progressOnly = %v, want %v", got, tc.want)
			}
		})
	}
}
