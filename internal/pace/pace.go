// Package pace keeps when each object's last pass began, for a
// leading-edge throttle: the first news after a quiet spell is acted on at
// once, and what follows within an interval is gathered into one pass at
// the interval's end. PodSet paces its pods' progress with it, PodBugger
// the passes its new incident records ask for. It also keeps holds: news
// a controller's own action is about to make stale, held back for up to
// an interval (ModelBox's first status, PodSet's replacements).
package pace

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Passes are when each object's last pass began. The zero value is ready.
type Passes struct {
	mu sync.Mutex
	at map[types.NamespacedName]time.Time
}

// Began records that a pass of key began at now.
func (p *Passes) Began(key types.NamespacedName, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.at == nil {
		p.at = map[types.NamespacedName]time.Time{}
	}
	p.at[key] = now
}

// Last is when key's last pass began; zero when none did.
func (p *Passes) Last(key types.NamespacedName) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.at[key]
}

// Wait is how long, at now, a pass of key asked for waits: the rest of
// interval since its last pass began, nothing once that has passed (or when
// none did).
func (p *Passes) Wait(key types.NamespacedName, now time.Time, interval time.Duration) time.Duration {
	return max(0, p.Last(key).Add(interval).Sub(now))
}

// Forget drops key (its object is gone).
func (p *Passes) Forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.at, key)
}

// Holds are when each object's hold began: news (a status) that a
// controller's own action (children or pods it just created) is about to
// make stale, written only once the action has had an interval to do so.
// The zero value is ready.
type Holds struct {
	mu sync.Mutex
	at map[types.NamespacedName]time.Time
}

// Start holds key's news from now; a hold already running keeps its start.
func (h *Holds) Start(key types.NamespacedName, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.at == nil {
		h.at = map[types.NamespacedName]time.Time{}
	}
	if _, ok := h.at[key]; !ok {
		h.at[key] = now
	}
}

// Wait is how long key's news is still held at now: the rest of interval
// since its hold began, while holdable says the news is of the kind held.
// It is zero when key is not held, its hold has run out, or the news is
// not holdable, and then the hold is over.
func (h *Holds) Wait(key types.NamespacedName, now time.Time, interval time.Duration, holdable bool) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	at, ok := h.at[key]
	if !ok {
		return 0
	}
	if left := at.Add(interval).Sub(now); left > 0 && holdable {
		return left
	}
	delete(h.at, key)
	return 0
}

// Forget drops key (its object is gone).
func (h *Holds) Forget(key types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.at, key)
}
