package podset

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/status"
)

// replacing holds back, for up to statusInterval after a sync created pods,
// a status that only says pods are missing or not ready yet: the news the
// creations just made stale.
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
type replacing struct {
	mu   sync.Mutex
	made map[types.NamespacedName]time.Time
}

func newReplacing() *replacing {
	return &replacing{made: map[types.NamespacedName]time.Time{}}
}

// created records that a sync of the PodSet key names created pods at now;
// a later creation within the hold keeps the first.
func (h *replacing) created(key types.NamespacedName, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.made[key]; !ok {
		h.made[key] = now
	}
}

// wait is how long the status want of the PodSet key names, whose status
// on the apiserver is held, is still held back at now: zero when it is due
// or is news heldBack does not hold, and then it is no longer held.
func (h *replacing) wait(key types.NamespacedName, now time.Time, size int32, held, want *appsv1beta1.PodSetStatus) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	at, ok := h.made[key]
	if !ok {
		return 0
	}
	if left := at.Add(statusInterval).Sub(now); left > 0 && heldBack(size, held, want) {
		return left
	}
	delete(h.made, key)
	return 0
}

// forget drops the PodSet key names.
func (h *replacing) forget(key types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.made, key)
}

// heldBack says whether want, against held, is only a replacement's news:
// the same generation observed, Available and Stalled as they were, no
// ReplicaFailure, and a set of size not settled.
func heldBack(size int32, held, want *appsv1beta1.PodSetStatus) bool {
	same := func(kind string) bool {
		return conditionStatus(held.Conditions, kind) == conditionStatus(want.Conditions, kind)
	}
	settled := want.Replicas == size && want.UpdatedReplicas == size && want.AvailableReplicas == size && want.TerminatingReplicas == 0
	return held.ObservedGeneration == want.ObservedGeneration && !settled &&
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
