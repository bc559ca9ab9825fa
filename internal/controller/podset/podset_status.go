package podset

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/status"
)

// computeStatus computes a PodSet's whole status from its pods (those it
// controls, in any state), the hash of its current template, and what this
// sync did: synced says whether it tried to create or delete pods (it does
// not while the cache lags behind its own writes), failure is the error of
// those attempts. It reads the old status only to keep the conditions'
// transition times and, when nothing was tried, the last ReplicaFailure.
// now stamps changed conditions. Counts come first, then one function per
// condition.
func computeStatus(set *appsv1beta1.PodSet, pods []*corev1.Pod, hash string, synced bool, failure *syncFailure, now metav1.Time) appsv1beta1.PodSetStatus {
	st := countPods(set, pods, hash, now.Time)
	st.Selector = selectorOf(set)
	st.ObservedGeneration = set.Generation
	st.Conditions = slices.Clone(set.Status.Conditions)
	for _, c := range []metav1.Condition{
		availableCondition(set, &st),
		progressingCondition(set, &st),
	} {
		c.ObservedGeneration = set.Generation
		status.SetCondition(&st.Conditions, c, now)
	}
	switch c := replicaFailureCondition(failure); {
	case c != nil:
		c.ObservedGeneration = set.Generation
		status.SetCondition(&st.Conditions, *c, now)
	case synced:
		meta.RemoveStatusCondition(&st.Conditions, appsv1beta1.ConditionReplicaFailure)
	}
	status.SetHealth(&st.Conditions, set.Generation, health(set, &st), now)
	return st
}

// countPods counts set's pods into a status without conditions: the active
// ones (named, and counted as ready, available at now and running the
// template of hash) and, apart, the terminating ones that have not finished.
func countPods(set *appsv1beta1.PodSet, pods []*corev1.Pod, hash string, now time.Time) appsv1beta1.PodSetStatus {
	var st appsv1beta1.PodSetStatus
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
		if isAvailable(p, set.Spec.MinReadySeconds, now) {
			st.AvailableReplicas++
		}
		if isUpdated(p, hash) {
			st.UpdatedReplicas++
		}
	}
	slices.Sort(st.PodNames)
	return st
}

// availableCondition says whether enough of set's pods are available: all
// but the update strategy's maxUnavailable.
func availableCondition(set *appsv1beta1.PodSet, st *appsv1beta1.PodSetStatus) metav1.Condition {
	size := set.Spec.Replicas
	minAvailable := max(0, int(size)-maxUnavailable(set.Spec.UpdateStrategy, size))
	msg := fmt.Sprintf("%d of %d pods are available (at least %d needed)", st.AvailableReplicas, size, minAvailable)
	if int(st.AvailableReplicas) >= minAvailable {
		return metav1.Condition{Type: appsv1beta1.ConditionAvailable, Status: metav1.ConditionTrue,
			Reason: appsv1beta1.ReasonMinimumReplicasAvailable, Message: msg}
	}
	return metav1.Condition{Type: appsv1beta1.ConditionAvailable, Status: metav1.ConditionFalse,
		Reason: appsv1beta1.ReasonMinimumReplicasUnavailable, Message: msg}
}

// progressingCondition says what set's pods are on their way to, the first
// of: scaling up, scaling down, updating to the current template, becoming
// ready; or that they are there.
func progressingCondition(set *appsv1beta1.PodSet, st *appsv1beta1.PodSetStatus) metav1.Condition {
	size := set.Spec.Replicas
	progressing := func(reason, msg string) metav1.Condition {
		return metav1.Condition{Type: appsv1beta1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: reason, Message: msg}
	}
	switch {
	case st.Replicas < size:
		return progressing(appsv1beta1.ReasonScalingUp, fmt.Sprintf("%d of %d pods exist", st.Replicas, size))
	case st.Replicas > size:
		return progressing(appsv1beta1.ReasonScalingDown, fmt.Sprintf("%d pods exist, %d wanted", st.Replicas, size))
	case st.UpdatedReplicas < size:
		return progressing(appsv1beta1.ReasonUpdating, fmt.Sprintf("%d of %d pods run the current template", st.UpdatedReplicas, size))
	case st.ReadyReplicas < size:
		return progressing(appsv1beta1.ReasonWaitingForReady, fmt.Sprintf("%d of %d pods are ready", st.ReadyReplicas, size))
	}
	return metav1.Condition{Type: appsv1beta1.ConditionProgressing, Status: metav1.ConditionFalse,
		Reason: appsv1beta1.ReasonUpToDate, Message: fmt.Sprintf("all %d pods run the current template and are ready", size)}
}

// replicaFailureCondition is the ReplicaFailure condition of a sync that
// failed to create or delete pods, nil for one that did not fail (or did not
// try: computeStatus then keeps the last one).
func replicaFailureCondition(failure *syncFailure) *metav1.Condition {
	if failure == nil {
		return nil
	}
	return &metav1.Condition{Type: appsv1beta1.ConditionReplicaFailure, Status: metav1.ConditionTrue,
		Reason: failure.reason, Message: failure.err.Error()}
}

// statusInterval paces a PodSet's status writes while its pods change: a
// status names every pod, so each write of a thousand-pod set costs the
// apiserver a large patch and every watcher a large copy, and a scale-up
// changes the counts with nearly every pod event. Changes a user waits on
// are written at once (urgentStatus); counts in between at most once per
// interval.
const statusInterval = time.Second

// urgentStatus says whether a change of the status of obj, a PodSet, is
// written at once rather than paced: a new observedGeneration, a condition
// that appeared, went or changed its status, a reason that changed other
// than a step of the set's way (progressStep), or a set that has settled,
// every pod there, ready and available.
func urgentStatus(obj client.Object, held, want *appsv1beta1.PodSetStatus) bool {
	size := obj.(*appsv1beta1.PodSet).Spec.Replicas
	return held.ObservedGeneration != want.ObservedGeneration ||
		!slices.EqualFunc(held.Conditions, want.Conditions, func(x, y metav1.Condition) bool {
			return x.Type == y.Type && x.Status == y.Status && (x.Reason == y.Reason || progressStep(y))
		}) ||
		settled(size, want)
}

// settled says whether a status shows a set of size settled: every pod
// there, updated and available, none terminating.
func settled(size int32, st *appsv1beta1.PodSetStatus) bool {
	return st.Replicas == size && st.UpdatedReplicas == size && st.AvailableReplicas == size && st.TerminatingReplicas == 0
}

// progressStep says whether c, with its status unchanged, only says which
// step of its way a set is on: Progressing while True (ScalingUp, then
// WaitingForReady), Ready while False, which repeats it. Such a step is a
// count's news, paced as counts are: after a failover each replaced pod's
// set went ScalingUp, WaitingForReady, then settled, and the middle write
// was a third of the new leader's status writes, each a sync the other sets
// waited behind (TestFailoverStatusTrail; docs/guides/podset.md). Where the set
// arrives (Progressing False, Ready True), Available, Stalled and
// ReplicaFailure are written at once.
func progressStep(c metav1.Condition) bool {
	return c.Type == appsv1beta1.ConditionProgressing && c.Status == metav1.ConditionTrue ||
		c.Type == status.ConditionReady && c.Status == metav1.ConditionFalse
}
