package apps

import (
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	appsv1alpha1 "github.com/deckhand-dev/deckhand/api/apps/v1alpha1"
)

// burstLimit caps the pods created or deleted in one sync, so a size of
// thousands is reached in steps that each let the cache and other PodSets
// catch up (the ReplicaSet controller's burstReplicas).
const burstLimit = 500

// podDeletionCost is the annotation a user (or autoscaler) sets to say which
// pods are cheaper to remove; the ReplicaSet controller honours the same one.
const podDeletionCost = "controller.kubernetes.io/pod-deletion-cost"

// slowStartBatchSizes splits n into batches that double from initial: 1, 2,
// 4, … with the last one cut to what is left.
func slowStartBatchSizes(n, initial int) []int {
	var sizes []int
	for batch := initial; n > 0; batch *= 2 {
		b := min(batch, n)
		sizes = append(sizes, b)
		n -= b
	}
	return sizes
}

// slowStartBatch calls fn n times, in batches that double in size (1, 2, 4,
// …), the calls of a batch in parallel. It stops after the first batch in
// which a call fails, so that a request that fails for every pod (a quota, a
// webhook that refuses them) is made a handful of times, not n times. It
// returns how many calls succeeded and the errors of the failed ones.
func slowStartBatch(n int, fn func() error) (succeeded int, errs []error) {
	for _, size := range slowStartBatchSizes(n, 1) {
		var (
			mu sync.Mutex
			wg sync.WaitGroup
		)
		for range size {
			wg.Go(func() {
				err := fn()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
				} else {
					succeeded++
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			return succeeded, errs
		}
	}
	return succeeded, nil
}

// deletionOrder sorts pods so that the ones to delete first come first:
//
//  1. pods a user marked with apps.deckhand.dev/delete-first: "true";
//  2. unscheduled before scheduled;
//  3. Pending before Unknown before Running;
//  4. not ready before ready;
//  5. lower controller.kubernetes.io/pod-deletion-cost first;
//  6. outdated (older template) before updated;
//  7. ready for less time before ready for longer;
//  8. more container restarts before fewer;
//  9. newer before older; then by name, so the order is total.
//
// Rules 2–5 and 7–9 are the ReplicaSet controller's.
func deletionOrder(pods []*corev1.Pod, hash string) []*corev1.Pod {
	out := slices.Clone(pods)
	slices.SortStableFunc(out, func(a, b *corev1.Pod) int {
		return compareForDeletion(a, b, hash)
	})
	return out
}

// compareForDeletion is negative when a should be deleted before b.
func compareForDeletion(a, b *corev1.Pod, hash string) int {
	if c := compareBool(markedDeleteFirst(a), markedDeleteFirst(b)); c != 0 {
		return c
	}
	if c := compareBool(a.Spec.NodeName == "", b.Spec.NodeName == ""); c != 0 {
		return c
	}
	if c := phaseRank(a.Status.Phase) - phaseRank(b.Status.Phase); c != 0 {
		return c
	}
	if c := compareBool(!isReady(a), !isReady(b)); c != 0 {
		return c
	}
	if c := deletionCost(a) - deletionCost(b); c != 0 {
		if c < 0 {
			return -1
		}
		return 1
	}
	if c := compareBool(!isUpdated(a, hash), !isUpdated(b, hash)); c != 0 {
		return c
	}
	if isReady(a) && isReady(b) {
		// Ready for less time goes first: a later transition time.
		if c := readyCondition(b).LastTransitionTime.Compare(readyCondition(a).LastTransitionTime.Time); c != 0 {
			return c
		}
	}
	if c := restarts(b) - restarts(a); c != 0 {
		return c
	}
	if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
		return c
	}
	if a.Name < b.Name {
		return -1
	} else if a.Name > b.Name {
		return 1
	}
	return 0
}

// compareBool orders true before false.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	default:
		return 1
	}
}

func markedDeleteFirst(p *corev1.Pod) bool {
	return p.Annotations[appsv1alpha1.DeleteFirstAnnotation] == "true"
}

func phaseRank(p corev1.PodPhase) int {
	switch p {
	case corev1.PodPending, "":
		return 0
	case corev1.PodUnknown:
		return 1
	default:
		return 2
	}
}

// deletionCost reads the pod-deletion-cost annotation; a missing or invalid
// value is 0, as for the ReplicaSet controller.
func deletionCost(p *corev1.Pod) int64 {
	v, ok := p.Annotations[podDeletionCost]
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0
	}
	return n
}

func restarts(p *corev1.Pod) int {
	n := 0
	for _, s := range p.Status.ContainerStatuses {
		n += int(s.RestartCount)
	}
	return n
}

// maxUnavailable resolves the strategy's maxUnavailable against size: a
// percentage rounds down, and the result is at least 1 (with no surge, 0
// would never let a rollout start) and at most size.
func maxUnavailable(s appsv1alpha1.PodSetUpdateStrategy, size int32) int {
	v := intstr.FromInt32(1)
	if s.MaxUnavailable != nil {
		v = *s.MaxUnavailable
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, int(size), false)
	if err != nil {
		// The schema admits only integers and percentages; fall back to
		// the safest rollout.
		n = 1
	}
	return max(1, min(n, int(size)))
}

// rolloutVictims picks the outdated pods a rolling update may delete now. A
// not-ready outdated pod can always go: deleting it costs no availability.
// A ready one may go only while fewer than maxUnavailable of the size pods
// would then be unready. active must hold exactly size pods.
func rolloutVictims(active []*corev1.Pod, hash string, size int32, maxUnav int) []*corev1.Pod {
	ready := 0
	for _, p := range active {
		if isReady(p) {
			ready++
		}
	}
	budget := maxUnav - (int(size) - ready)
	var victims []*corev1.Pod
	for _, p := range deletionOrder(active, hash) {
		if isUpdated(p, hash) {
			continue
		}
		if isReady(p) {
			if budget <= 0 {
				continue
			}
			budget--
		}
		victims = append(victims, p)
	}
	return victims
}
