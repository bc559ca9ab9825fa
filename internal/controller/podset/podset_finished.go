package podset

import (
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Finished pods are replaced with a backoff per PodSet: the first at once,
// then after 1 s, 2 s, 4 s, … up to 5 minutes (the kubelet's crash-loop
// backoff has the same ceiling). After twice the ceiling without a finished
// pod the backoff starts over.
const (
	finishedBackoffBase = time.Second
	finishedBackoffMax  = 5 * time.Minute
)

// finishedBackoff remembers, per PodSet UID, when its finished pods may next
// be replaced.
type finishedBackoff struct {
	mu sync.Mutex
	m  map[types.UID]backoffEntry
}

// backoffEntry is one PodSet's backoff: how many replacements in a row,
// and the time before which the next must wait.
type backoffEntry struct {
	name     types.NamespacedName
	replaced int
	until    time.Time
}

func newFinishedBackoff() *finishedBackoff {
	return &finishedBackoff{m: map[types.UID]backoffEntry{}}
}

// wait is how long the PodSet's finished pods must still wait at now.
func (b *finishedBackoff) wait(uid types.UID, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(0, b.m[uid].until.Sub(now))
}

// replaced records that the PodSet replaced its finished pods at now.
func (b *finishedBackoff) replaced(uid types.UID, name types.NamespacedName, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := nextBackoff(b.m[uid], now)
	e.name = name
	b.m[uid] = e
}

// forget drops the backoff of PodSets with this name: they are gone.
func (b *finishedBackoff) forget(name types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	maps.DeleteFunc(b.m, func(_ types.UID, e backoffEntry) bool { return e.name == name })
}

// nextBackoff is e after a replacement at now: the delay doubles from
// finishedBackoffBase up to finishedBackoffMax, and starts over after a
// quiet spell of twice the maximum.
func nextBackoff(e backoffEntry, now time.Time) backoffEntry {
	if e.replaced > 0 && now.Sub(e.until) > 2*finishedBackoffMax {
		e.replaced = 0
	}
	delay := finishedBackoffBase
	for range e.replaced {
		delay *= 2
		if delay >= finishedBackoffMax {
			delay = finishedBackoffMax
			break
		}
	}
	e.replaced++
	e.until = now.Add(delay)
	return e
}

// finishedMessage says why a pod ended, for the Event that outlives it:
// the pod's phase, reason and message, and each container's exit code and
// reason.
func finishedMessage(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Pod %s %s", p.Name, p.Status.Phase)
	if p.Status.Reason != "" {
		fmt.Fprintf(&b, " (%s)", p.Status.Reason)
	}
	if p.Status.Message != "" {
		fmt.Fprintf(&b, ": %s", p.Status.Message)
	}
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		t := s.State.Terminated
		if t == nil {
			t = s.LastTerminationState.Terminated
		}
		if t == nil {
			continue
		}
		fmt.Fprintf(&b, "; container %s exited with code %d", s.Name, t.ExitCode)
		if t.Reason != "" {
			fmt.Fprintf(&b, " (%s)", t.Reason)
		}
		if t.Message != "" {
			fmt.Fprintf(&b, ": %s", t.Message)
		}
	}
	return b.String()
}
