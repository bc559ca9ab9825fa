package podset

import (
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
)

// burstLimit caps the pods deleted in one sync, so a size of thousands is
// reached in steps that each let the cache and other PodSets catch up (the
// ReplicaSet controller's burstReplicas).
const burstLimit = 500

// createBurst caps the pods created in one sync: twice as many, so that a
// 1,000-pod scale-up is one streaming slow start rather than two rounds
// with a wait for the cache between them. Creations in flight stay capped
// at maxInflight.
const createBurst = 2 * burstLimit

// podDeletionCost is the annotation a user (or autoscaler) sets to say which
// pods are cheaper to remove; the ReplicaSet controller honours the same one.
const podDeletionCost = "controller.kubernetes.io/pod-deletion-cost"

// maxInflight caps the creations one sync has in flight at once: the most
// one sync makes at all, as the ReplicaSet controller's last batch of a
// burst may. An apiserver accepts pods faster with more in flight (etcd
// commits them in larger batches): capped at 64, a 1,000-pod scale-up took
// 1.56× the ReplicaSet controller's time (make bench).
const maxInflight = burstLimit

// maxInflightBytes bounds the template bytes one sync's creations have in
// flight: each holds the pod built from the template and its request body.
// A template of a few kilobytes is capped by maxInflight alone; a namespace
// editor's 1 MiB template gets 16 creations at once, not 500 (500 MiB).
const maxInflightBytes = 16 << 20

// inflightLimit is how many creations of pods from tmpl one sync has in
// flight at most.
func inflightLimit(tmpl *corev1.PodTemplateSpec) int {
	return max(1, min(maxInflight, maxInflightBytes/max(1, tmpl.Size())))
}

// creationBudget bounds what the creations in flight of all the controller's
// workers hold together, in bytes of template: as much as four syncs may
// have by the bounds above (64 MiB), shared by the workers, so that
// sixteen workers hold no more than four did. Each creation weighs its
// template's size, and at least creationWeightMin, so that small templates
// are bounded in number too: 2,048 creations of a small template, 64 of a
// 1 MiB one, whichever PodSets they are for.
const creationBudget = 4 * maxInflightBytes

// creationWeightMin is the least a creation in flight weighs against
// creationBudget: maxInflight creations of one sync weigh maxInflightBytes.
const creationWeightMin = maxInflightBytes / maxInflight

// creationWeight is what a creation of a pod from tmpl weighs against
// creationBudget.
func creationWeight(tmpl *corev1.PodTemplateSpec) int64 {
	return int64(max(creationWeightMin, tmpl.Size()))
}

// slowStart calls fn n times, with at most initial calls in flight at
// first and one more allowed with each success, up to limit, each call
// started only once admit lets it (admit blocks until it may start, and
// returns what to call when it has ended): like TCP's slow
// start, the concurrency doubles every round trip while calls succeed. Unlike
// batches that double (the ReplicaSet controller's slowStartBatch), it never
// waits for the slowest call of a batch before starting the next ones. Once a
// call fails no new call starts, so a request that fails for every pod (a
// quota, a webhook that refuses them) is made a handful of times, not n
// times. It returns how many calls succeeded and the errors of the failed
// ones.
func slowStart(n, initial, limit int, admit func() (func(), error), fn func() error) (succeeded int, errs []error) {
	var (
		mu       sync.Mutex
		done     = sync.NewCond(&mu)
		wg       sync.WaitGroup
		inflight int
		allowed  = max(1, min(initial, limit))
	)
	mu.Lock()
	for started := 0; started < n && len(errs) == 0; started++ {
		for inflight >= allowed && len(errs) == 0 {
			done.Wait()
		}
		if len(errs) > 0 {
			break
		}
		mu.Unlock()
		ended, err := admit()
		mu.Lock()
		if err != nil {
			errs = append(errs, err)
			break
		}
		if len(errs) > 0 { // a call failed while this one waited
			ended()
			break
		}
		inflight++
		wg.Go(func() {
			err := fn()
			ended()
			mu.Lock()
			defer mu.Unlock()
			inflight--
			if err != nil {
				errs = append(errs, err)
			} else {
				succeeded++
				allowed = min(allowed+1, limit)
			}
			done.Signal()
		})
	}
	mu.Unlock()
	wg.Wait()
	return succeeded, errs
}

// initialInflight is how many creations a sync starts with in flight. A
// PodSet whose last attempts did not fail (no ReplicaFailure) and that
// already has active pods has shown that its pods are admitted: it starts at
// as many as it has, up to maxInflight, instead of at one, so the second
// round of a large scale-up does not ramp up from a single pod again. A new
// PodSet, or one whose creations failed, starts at one: a quota or webhook
// that refuses every pod is asked once per attempt.
func initialInflight(active int, failing bool) int {
	if failing {
		return 1
	}
	return max(1, min(active, maxInflight))
}

// deletionOrder sorts pods so that the ones to delete first come first:
//
//  1. pods a user marked with apps.deckhand.dev/delete-first: "true";
//  2. unscheduled before scheduled;
//  3. Pending before Unknown before Running;
//  4. not ready before ready;
//  5. lower controller.kubernetes.io/pod-deletion-cost first;
//  6. pods on nodes that hold more of these pods first (spreads the set);
//  7. outdated (older template) before updated;
//  8. ready for less time before ready for longer;
//  9. more container restarts before fewer;
//  10. newer before older; then by name, so the order is total.
//
// Rules 2–6 and 8–10 are the ReplicaSet controller's (ActivePodsWithRanks,
// where the rank is the number of related pods on the same node).
func deletionOrder(pods []*corev1.Pod, hash string) []*corev1.Pod {
	onNode := map[string]int{}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			onNode[p.Spec.NodeName]++
		}
	}
	out := slices.Clone(pods)
	slices.SortStableFunc(out, func(a, b *corev1.Pod) int {
		return compareForDeletion(a, b, hash, onNode)
	})
	return out
}

// compareForDeletion is negative when a should be deleted before b; onNode
// counts the pods being ranked per node.
func compareForDeletion(a, b *corev1.Pod, hash string, onNode map[string]int) int {
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
	if c := onNode[b.Spec.NodeName] - onNode[a.Spec.NodeName]; c != 0 {
		return c
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
	return p.Annotations[appsv1beta1.DeleteFirstAnnotation] == "true"
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

// maxUnavailable resolves the strategy's maxUnavailable (default 1)
// against size, rounding a percentage down, at most size. It is 0 only with
// a surge: with neither, no rollout could start, so it is then 1, as for a
// Deployment.
func maxUnavailable(s appsv1beta1.PodSetUpdateStrategy, size int32) int {
	n := scaled(s.RollingUpdate.MaxUnavailable, intstr.FromInt32(1), size, false)
	if n == 0 && maxSurge(s, size) == 0 {
		return 1
	}
	return min(n, int(size))
}

// maxSurge resolves the strategy's maxSurge (default 0) against size,
// rounding a percentage up: how many pods beyond size a rolling update may
// create.
func maxSurge(s appsv1beta1.PodSetUpdateStrategy, size int32) int {
	return scaled(s.RollingUpdate.MaxSurge, intstr.FromInt32(0), size, true)
}

// scaled resolves v (def when nil) against size. The schema admits only
// integers and percentages; anything else falls back to def.
func scaled(v *intstr.IntOrString, def intstr.IntOrString, size int32, roundUp bool) int {
	if v == nil {
		v = &def
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, int(size), roundUp)
	if err != nil {
		n, _ = intstr.GetScaledValueFromIntOrPercent(&def, int(size), roundUp)
	}
	return max(0, n)
}

// plan decides what one sync does with a PodSet's active pods: how many
// pods to create and which to delete. held counts finished pods that still
// hold their place (their replacement is backing off); available says
// whether a pod counts as available.
func plan(spec appsv1beta1.PodSetSpec, active []*corev1.Pod, held int, hash string, available func(*corev1.Pod) bool) (create int, doomed []*corev1.Pod) {
	size := int(spec.Replicas)
	rolling := spec.UpdateStrategy.Type != appsv1beta1.OnDeleteStrategy && slices.ContainsFunc(active, func(p *corev1.Pod) bool { return !isUpdated(p, hash) })
	surge := maxSurge(spec.UpdateStrategy, spec.Replicas)
	switch {
	case len(active)+held < size:
		return min(size-len(active)-held, createBurst), nil
	case rolling && len(active) <= size+surge:
		return rollout(active, hash, size, surge, maxUnavailable(spec.UpdateStrategy, spec.Replicas), available)
	case len(active) > size:
		return 0, deletionOrder(active, hash)[:min(len(active)-size, burstLimit)]
	}
	return 0, nil
}

// rollout is one step of a rolling update of active (size to size+surge
// pods): new pods up to size+surge, and the outdated pods that may go. A
// not-available outdated pod can always go: deleting it costs no
// availability. An available one may go only while at least size-maxUnav
// pods stay available.
func rollout(active []*corev1.Pod, hash string, size, surge, maxUnav int, available func(*corev1.Pod) bool) (create int, victims []*corev1.Pod) {
	updated, avail := 0, 0
	for _, p := range active {
		if isUpdated(p, hash) {
			updated++
		}
		if available(p) {
			avail++
		}
	}
	create = max(0, min(size+surge-len(active), size-updated))
	budget := avail - (size - maxUnav)
	for _, p := range deletionOrder(active, hash) {
		if isUpdated(p, hash) {
			continue
		}
		if available(p) {
			if budget <= 0 {
				continue
			}
			budget--
		}
		victims = append(victims, p)
	}
	return create, victims
}
