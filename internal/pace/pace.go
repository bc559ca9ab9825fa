// Package pace keeps when each object's last pass began, for a
// leading-edge throttle: the first news after a quiet spell is acted on at
// once, and what follows within an interval is gathered into one pass at
// the interval's end. PodSet paces its pods' progress with it, PodBugger
// the passes its new incident records ask for.
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
