package incident

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestRecordWritesGiveEachWaitingPodItsOwnSlot: a PodBugger's bucket lets
// a sixth of a minute's writes through at once; each pod beyond it is given
// its own slot, one token apart, and keeps it when it comes back early (an
// event of the pod); another PodBugger's bucket is its own; a bucket full
// again with no pod waiting is forgotten, and so is a slot a minute past
// whose pod never came back.
func TestRecordWritesGiveEachWaitingPodItsOwnSlot(t *testing.T) {
	now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	w := newRecordWrites(60) // one a second, ten at once
	pod := func(i int) types.NamespacedName {
		return types.NamespacedName{Namespace: "ns", Name: fmt.Sprint("web-", i)}
	}
	for i := range 10 {
		if wait := w.take("pb", pod(i), now); wait != 0 {
			t.Fatalf("write %d of the burst waits %s", i, wait)
		}
	}
	for i := 10; i < 13; i++ {
		if wait, want := w.take("pb", pod(i), now), time.Duration(i-9)*time.Second; wait != want {
			t.Fatalf("pod %d waits %s, want %s (its own slot)", i, wait, want)
		}
	}
	if wait := w.take("pb", pod(11), now.Add(500*time.Millisecond)); wait != 1500*time.Millisecond {
		t.Fatalf("pod 11 back early waits %s, want the rest of its slot, 1.5s", wait)
	}
	if wait := w.take("other", pod(0), now); wait != 0 {
		t.Fatalf("another PodBugger's first write waits %s", wait)
	}
	if wait := w.take("pb", pod(10), now.Add(time.Second)); wait != 0 {
		t.Fatalf("pod 10 at its slot waits %s", wait)
	}
	w.forget(now.Add(time.Minute))
	if _, ok := w.buckets["other"]; ok {
		t.Error("a bucket full again with no pod waiting is kept")
	}
	if b := w.buckets["pb"]; b == nil || len(b.slots) != 2 {
		t.Fatalf("the slots of pods 11 and 12 (due within the minute) forgotten: %+v", b)
	}
	w.forget(now.Add(3 * time.Minute))
	if len(w.buckets) != 0 {
		t.Errorf("buckets kept for slots long past and no writes: %d", len(w.buckets))
	}
}
