package podset

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/status"
)

// The Ready and Stalled conditions GitOps tools read (docs/operations/gitops.md).
func TestHealth(t *testing.T) {
	now := metav1.NewTime(t0.Add(time.Hour))
	quota := &syncFailure{reason: appsv1beta1.ReasonFailedCreate, err: errors.New("exceeded quota")}
	for name, tc := range map[string]struct {
		set     *appsv1beta1.PodSet
		pods    []*corev1.Pod
		failure *syncFailure
		ready   metav1.ConditionStatus
		reason  string
		stalled metav1.ConditionStatus
	}{
		"every pod there, current and available": {set: testSet(2), pods: []*corev1.Pod{testPod("web-a", ready), testPod("web-b", ready)},
			ready: metav1.ConditionTrue, reason: appsv1beta1.ReasonUpToDate, stalled: metav1.ConditionFalse},
		"scaling up": {set: testSet(3), pods: []*corev1.Pod{testPod("web-a", ready)},
			ready: metav1.ConditionFalse, reason: appsv1beta1.ReasonScalingUp, stalled: metav1.ConditionFalse},
		"rolling out": {set: testSet(2), pods: []*corev1.Pod{testPod("web-a", ready, outdated), testPod("web-b", ready)},
			ready: metav1.ConditionFalse, reason: appsv1beta1.ReasonUpdating, stalled: metav1.ConditionFalse},
		"ready, not yet available": {set: minReady(testSet(1), 3600), pods: []*corev1.Pod{testPod("web-a", readySince(30*time.Minute))},
			ready: metav1.ConditionFalse, reason: appsv1beta1.ReasonMinimumReplicasUnavailable, stalled: metav1.ConditionFalse},
		"a removed pod still terminating": {set: testSet(1), pods: []*corev1.Pod{testPod("web-a", ready), testPod("web-b", ready, terminating)},
			ready: metav1.ConditionFalse, reason: appsv1beta1.ReasonScalingDown, stalled: metav1.ConditionFalse},
		"pods refused by a quota": {set: testSet(2), failure: quota,
			ready: metav1.ConditionFalse, reason: appsv1beta1.ReasonFailedCreate, stalled: metav1.ConditionTrue},
	} {
		t.Run(name, func(t *testing.T) {
			st := computeStatus(tc.set, tc.pods, "new", true, tc.failure, now)
			r := meta.FindStatusCondition(st.Conditions, status.ConditionReady)
			s := meta.FindStatusCondition(st.Conditions, status.ConditionStalled)
			if r == nil || s == nil {
				t.Fatalf("conditions %+v lack Ready or Stalled", st.Conditions)
			}
			if r.Status != tc.ready || r.Reason != tc.reason || s.Status != tc.stalled {
				t.Errorf("Ready %s/%s, Stalled %s; want Ready %s/%s, Stalled %s", r.Status, r.Reason, s.Status, tc.ready, tc.reason, tc.stalled)
			}
			if r.ObservedGeneration != tc.set.Generation || s.ObservedGeneration != tc.set.Generation {
				t.Errorf("Ready and Stalled judged generations %d and %d, not %d", r.ObservedGeneration, s.ObservedGeneration, tc.set.Generation)
			}
		})
	}
}
