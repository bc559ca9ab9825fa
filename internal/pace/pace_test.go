package pace_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/deckhand-dev/deckhand/internal/pace"
)

// A hold runs from its first start for the interval while the news is of
// the kind held, and is over once it is due or the news is not.
func TestHolds(t *testing.T) {
	var h pace.Holds
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	t0 := time.Unix(1000, 0)
	if got := h.Wait(key, t0, time.Second, true); got != 0 {
		t.Fatalf("a key never held waits %s, want 0", got)
	}
	h.Start(key, t0)
	h.Start(key, t0.Add(500*time.Millisecond)) // a later start keeps the first
	if got := h.Wait(key, t0.Add(300*time.Millisecond), time.Second, true); got != 700*time.Millisecond {
		t.Errorf("held for %s, want the rest of the second, 700ms", got)
	}
	if got := h.Wait(key, t0.Add(400*time.Millisecond), time.Second, false); got != 0 {
		t.Errorf("news not of the kind held waits %s, want 0", got)
	}
	if got := h.Wait(key, t0.Add(500*time.Millisecond), time.Second, true); got != 0 {
		t.Errorf("a hold that ended on news not held waits %s again, want 0", got)
	}
	h.Start(key, t0.Add(2*time.Second))
	if got := h.Wait(key, t0.Add(3*time.Second), time.Second, true); got != 0 {
		t.Errorf("a hold past its interval waits %s, want 0", got)
	}
	h.Start(key, t0.Add(4*time.Second))
	h.Forget(key)
	if got := h.Wait(key, t0.Add(4*time.Second), time.Second, true); got != 0 {
		t.Errorf("a forgotten key waits %s, want 0", got)
	}
}

// A hold that runs out exactly at its interval is over: the next start
// holds afresh rather than extending the old hold.
func TestAHoldDueExactlyIsOver(t *testing.T) {
	var h pace.Holds
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	t0 := time.Unix(1000, 0)
	h.Start(key, t0)
	if got := h.Wait(key, t0.Add(time.Second), time.Second, true); got != 0 {
		t.Fatalf("a hold due now waits %s, want 0", got)
	}
	h.Start(key, t0.Add(1500*time.Millisecond))
	if got := h.Wait(key, t0.Add(1800*time.Millisecond), time.Second, true); got != 700*time.Millisecond {
		t.Errorf("a hold started after the last ran out waits %s, want 700ms", got)
	}
}
