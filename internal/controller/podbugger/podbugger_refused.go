package podbugger

import (
	"cmp"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// Refused injections are retried after firstRetry, then after twice as long
// each time, maxAttempts times in all; then the pod is left alone until the
// PodBugger's spec or the namespace's labels change (or the manager
// restarts).
const (
	maxAttempts = 5
	firstRetry  = 10 * time.Second
)

// retryDelay is how long after its attempts-th refusal a pod is tried again.
func retryDelay(attempts int) time.Duration {
	return firstRetry << min(attempts-1, maxAttempts)
}

// memory is what the controller remembers between passes, per PodBugger, so
// that a pass does not repeat what an earlier one did: the pods whose
// injection the apiserver refused (Pod Security, validation) and the pods
// already reported as skipped. Without it, every pod event of the namespace
// would repeat an uncached list, a failing update and a Warning Event for each
// refused pod, and refused pods would use up maxPods.
//
// It is a cache of work not worth repeating, never the record of what was
// done (the pods are): losing it (a restart) costs one more attempt per pod.
type memory struct {
	mu          sync.Mutex
	byPodBugger map[types.NamespacedName]*podBuggerMemory
}

// podBuggerMemory is what is remembered for one PodBugger. It holds for one
// generation of its spec and one set of labels on its namespace (where the
// Pod Security levels are): a change to either gives every pod a new chance.
type podBuggerMemory struct {
	generation      int64
	namespaceLabels string
	refused         map[types.UID]refusal
	// skipped maps the pods reported as skipped to the reason reported.
	skipped map[types.UID]string
}

// refusal is a pod whose injection the apiserver refused.
type refusal struct {
	pod      string
	attempts int
	last     time.Time
	err      string
}

// due reports whether the pod may be tried again at now.
func (f refusal) due(now time.Time) bool {
	return f.attempts < maxAttempts && !now.Before(f.last.Add(retryDelay(f.attempts)))
}

func newMemory() *memory {
	return &memory{byPodBugger: map[types.NamespacedName]*podBuggerMemory{}}
}

// of returns what is remembered for the PodBugger key at generation in a
// namespace labelled nsLabels, empty when either changed.
func (m *memory) of(key types.NamespacedName, generation int64, nsLabels map[string]string) *podBuggerMemory {
	m.mu.Lock()
	defer m.mu.Unlock()
	ls := labels.Set(nsLabels).String()
	pm, ok := m.byPodBugger[key]
	if !ok || pm.generation != generation || pm.namespaceLabels != ls {
		pm = &podBuggerMemory{generation: generation, namespaceLabels: ls,
			refused: map[types.UID]refusal{}, skipped: map[types.UID]string{}}
		m.byPodBugger[key] = pm
	}
	return pm
}

// forget drops what is remembered for a deleted PodBugger.
func (m *memory) forget(key types.NamespacedName) {
	m.mu.Lock()
	delete(m.byPodBugger, key)
	m.mu.Unlock()
}

// The methods of podBuggerMemory are called only by the reconciles of its
// PodBugger, which the workqueue never runs at once.

// prune forgets the pods that are no longer among pods.
func (pm *podBuggerMemory) prune(pods []corev1.Pod) {
	present := make(map[types.UID]bool, len(pods))
	for i := range pods {
		present[pods[i].UID] = true
	}
	for uid := range pm.refused {
		if !present[uid] {
			delete(pm.refused, uid)
		}
	}
	for uid := range pm.skipped {
		if !present[uid] {
			delete(pm.skipped, uid)
		}
	}
}

// passOver are the refused pods not to be tried at now.
func (pm *podBuggerMemory) passOver(now time.Time) map[types.UID]bool {
	out := map[types.UID]bool{}
	for uid, f := range pm.refused {
		if !f.due(now) {
			out[uid] = true
		}
	}
	return out
}

// refuse records that pod's injection was refused at now with err.
func (pm *podBuggerMemory) refuse(pod *corev1.Pod, err error, now time.Time) {
	f := pm.refused[pod.UID]
	pm.refused[pod.UID] = refusal{pod: pod.Name, attempts: f.attempts + 1, last: now, err: err.Error()}
}

// firstSkip records that pod is skipped for reason and reports whether that
// is news: a pod is reported once, not on every pass.
func (pm *podBuggerMemory) firstSkip(pod *corev1.Pod, reason string) bool {
	if pm.skipped[pod.UID] == reason {
		return false
	}
	pm.skipped[pod.UID] = reason
	return true
}

// nextRetry is how long after now the earliest refused pod is due again;
// zero when none will be.
func (pm *podBuggerMemory) nextRetry(now time.Time) time.Duration {
	var next time.Duration
	for _, f := range pm.refused {
		if f.attempts >= maxAttempts {
			continue
		}
		if d := max(f.last.Add(retryDelay(f.attempts)).Sub(now), time.Second); next == 0 || d < next {
			next = d
		}
	}
	return next
}

// refusals lists the refused pods by name.
func (pm *podBuggerMemory) refusals() []refusal {
	out := make([]refusal, 0, len(pm.refused))
	for _, f := range pm.refused {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b refusal) int { return cmp.Compare(a.pod, b.pod) })
	return out
}
