package incident

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"

	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
)

// recordWrites is a token bucket per PodBugger for its record writes. A
// failure beyond it is not lost but coalesced: its pod is given the next
// free slot of the bucket and looked at again then, and what it shows then
// (its latest failure, with the restart count that says how many came
// before) is written. Each pod waits for its own slot, so that the pods
// waiting are looked at one slot apart, not all at each free token.
type recordWrites struct {
	mu        sync.Mutex
	perMinute int
	buckets   map[types.UID]*bucket
}

// bucket is one PodBugger's: its tokens, and the slots its waiting pods
// were given (when each may write).
type bucket struct {
	tokens *rate.Limiter
	slots  map[types.NamespacedName]time.Time
}

func newRecordWrites(perMinute int) *recordWrites {
	if perMinute <= 0 {
		perMinute = policy.DefaultIncidentWritesPerMinute
	}
	return &recordWrites{perMinute: perMinute, buckets: map[types.UID]*bucket{}}
}

// take takes a write of pod's record for the PodBugger pb at now: 0, or
// how long until the slot pod was given (nothing more is taken then).
func (w *recordWrites) take(pb types.UID, pod types.NamespacedName, now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.buckets[pb]
	if b == nil {
		b = &bucket{tokens: rate.NewLimiter(rate.Limit(float64(w.perMinute)/60), max(1, w.perMinute/6)),
			slots: map[types.NamespacedName]time.Time{}}
		w.buckets[pb] = b
	}
	if at, ok := b.slots[pod]; ok {
		if now.Before(at) {
			return at.Sub(now)
		}
		delete(b.slots, pod)
		return 0
	}
	wait := b.tokens.ReserveN(now, 1).DelayFrom(now)
	if wait > 0 {
		b.slots[pod] = now.Add(wait)
	}
	return wait
}

// forget drops the buckets full again at now, with no pod waiting: their
// PodBuggers wrote nothing lately (or are gone), and a new bucket is full;
// and the slots a minute past, whose pods did not come back (gone). What
// is kept is bounded by the PodBuggers writing records and their pods.
func (w *recordWrites) forget(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for pb, b := range w.buckets {
		for pod, at := range b.slots {
			if now.Sub(at) > time.Minute {
				delete(b.slots, pod)
			}
		}
		if len(b.slots) == 0 && b.tokens.TokensAt(now) >= float64(b.tokens.Burst()) {
			delete(w.buckets, pb)
		}
	}
}
