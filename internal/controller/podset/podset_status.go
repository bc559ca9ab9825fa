package podset

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/status"
)

// computeStatus computes a PodSet's whole status from its pods (those it
// controls, in any state), the hash of its current template, and what this
// sync did: synced says whether it tried to create or delete pods (it does
// not while the cache lags behind its own writes), failure is the error of
// those attempts. It reads the old status only to keep the conditions'
// transition times and, when nothing was tried, the last ReplicaFailure.
// now stamps changed conditions.
func computeStatus(set *appsv1beta1.PodSet, pods []*corev1.Pod, hash string, synced bool, failure *syncFailure, now metav1.Time) appsv1beta1.PodSetStatus {
	st := appsv1beta1.PodSetStatus{
		Selector:           selectorOf(set),
		ObservedGeneration: set.Generation,
		Conditions:         slices.Clone(set.Status.Conditions),
	}
	for _, p := range pods {
		if p.DeletionTimestamp != nil && !isFinished(p) {
			st.TerminatingReplicas++
		}
		if !isActive(p) {
			continue
		}
		st.PodNames = append(st.PodNames, p.Name)
		st.Replicas++
		if isReady(p) {
			st.ReadyReplicas++
		}
		if isAvailable(p, set.Spec.MinReadySeconds, now.Time) {
			st.AvailableReplicas++
		}
		if isUpdated(p, hash) {
			st.UpdatedReplicas++
		}
	}
	slices.Sort(st.PodNames)

	size := set.Spec.Replicas
	minAvailable := max(0, int(size)-maxUnavailable(set.Spec.UpdateStrategy, size))
	setCondition := func(typ string, s metav1.ConditionStatus, reason, msg string) {
		c := metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: set.Generation}
		status.SetCondition(&st.Conditions, c, now)
	}

	if int(st.AvailableReplicas) >= minAvailable {
		setCondition(appsv1beta1.ConditionAvailable, metav1.ConditionTrue, appsv1beta1.ReasonMinimumReplicasAvailable,
			fmt.Sprintf("%d of %d pods are available (at least %d needed)", st.AvailableReplicas, size, minAvailable))
	} else {
		setCondition(appsv1beta1.ConditionAvailable, metav1.ConditionFalse, appsv1beta1.ReasonMinimumReplicasUnavailable,
			fmt.Sprintf("%d of %d pods are available (at least %d needed)", st.AvailableReplicas, size, minAvailable))
	}

	switch {
	case st.Replicas < size:
		setCondition(appsv1beta1.ConditionProgressing, metav1.ConditionTrue, appsv1beta1.ReasonScalingUp,
			fmt.Sprintf("%d of %d pods exist", st.Replicas, size))
	case st.Replicas > size:
		setCondition(appsv1beta1.ConditionProgressing, metav1.ConditionTrue, appsv1beta1.ReasonScalingDown,
			fmt.Sprintf("%d pods exist, %d wanted", st.Replicas, size))
	case st.UpdatedReplicas < size:
		setCondition(appsv1beta1.ConditionProgressing, metav1.ConditionTrue, appsv1beta1.ReasonUpdating,
			fmt.Sprintf("%d of %d pods run the current template", st.UpdatedReplicas, size))
	case st.ReadyReplicas < size:
		setCondition(appsv1beta1.ConditionProgressing, metav1.ConditionTrue, appsv1beta1.ReasonWaitingForReady,
			fmt.Sprintf("%d of %d pods are ready", st.ReadyReplicas, size))
	default:
		setCondition(appsv1beta1.ConditionProgressing, metav1.ConditionFalse, appsv1beta1.ReasonUpToDate,
			fmt.Sprintf("all %d pods run the current template and are ready", size))
	}

	switch {
	case failure != nil:
		setCondition(appsv1beta1.ConditionReplicaFailure, metav1.ConditionTrue, failure.reason, failure.err.Error())
	case synced:
		meta.RemoveStatusCondition(&st.Conditions, appsv1beta1.ConditionReplicaFailure)
	}
	return st
}

// statusInterval paces a PodSet's status writes while its pods change: a
// status names every pod, so each write of a thousand-pod set costs the
// apiserver a large patch and every watcher a large copy, and a scale-up
// changes the counts with nearly every pod event. Changes a user waits on
// are written at once (urgentStatus); counts in between at most once per
// interval.
const statusInterval = time.Second

// urgentStatus says whether a change of a status of a PodSet of size pods
// is written at once rather than paced: a new observedGeneration, a
// condition whose status or reason changed (a message only counts pods), or
// a set that has settled, every pod there, ready and available.
func urgentStatus(size int32) func(held, want *appsv1beta1.PodSetStatus) bool {
	return func(held, want *appsv1beta1.PodSetStatus) bool {
		return held.ObservedGeneration != want.ObservedGeneration ||
			status.ConditionsChanged(held.Conditions, want.Conditions) ||
			want.Replicas == size && want.UpdatedReplicas == size && want.AvailableReplicas == size && want.TerminatingReplicas == 0
	}
}
