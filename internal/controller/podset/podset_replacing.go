package podset

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/status"
)

// A sync that creates pods holds back (r.replacing, a pace.Holds), for up
// to statusInterval, a status that only says pods are missing or not ready
// yet: the news the creations just made stale.
//
// A settled PodSet that loses a pod (deleted, evicted, its node gone) is
// written twice by a sync per event: "9 of 10 pods exist" by the sync that
// replaces it, then settled once the replacement is ready. After a
// failover every PodSet the old leader left short goes through this at
// once, the first writes doubling the apiserver's work while the
// replacements wait behind them: at 1,000 PodSets the creating syncs took
// 22 s (make bench, scale-podset). Held, a replacement that is ready within
// the second costs one write; a slower one is written at the end of the
// second with what it has reached then (the counts pacing would have
// written then anyway), so a set is never left without its news for longer
// than a paced count is.
//
// Only such news is held (heldBack): a new generation, Available or
// Stalled changing, a ReplicaFailure, and a settled set are written at
// once. Memory only: a restarted manager holds nothing.

// heldBack says whether want, against held, is only a replacement's news:
// the same generation observed, Available and Stalled as they were, no
// ReplicaFailure, and a set of size not settled.
func heldBack(size int32, held, want *appsv1beta1.PodSetStatus) bool {
	same := func(kind string) bool {
		return conditionStatus(held.Conditions, kind) == conditionStatus(want.Conditions, kind)
	}
	return held.ObservedGeneration == want.ObservedGeneration && !settled(size, want) &&
		same(appsv1beta1.ConditionAvailable) && same(status.ConditionStalled) &&
		!meta.IsStatusConditionTrue(want.Conditions, appsv1beta1.ConditionReplicaFailure)
}

// conditionStatus is the status of the condition of kind in conds, empty
// when it has none.
func conditionStatus(conds []metav1.Condition, kind string) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(conds, kind); c != nil {
		return c.Status
	}
	return ""
}
