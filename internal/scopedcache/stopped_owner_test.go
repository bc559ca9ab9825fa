package scopedcache

import (
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	toolscache "k8s.io/client-go/tools/cache"
)

// The record of a handover waits for the new owner to tell what it had not
// caught up with then (toldIn.await); an owner stopped since tells nothing
// more, and the record goes. Handed a namespace, the cluster-wide informer
// was stopped back below the threshold (the namespace needed by none)
// before it had applied a pod the handler was told at 21: the record
// waited for it for good.
func TestARecordAwaitsNoStoppedOwner(t *testing.T) {
	stopped := &space{namespace: allNamespaces, held: &heldStores{}, synced: make(chan struct{}), dropped: make(chan struct{})}
	close(stopped.synced)
	close(stopped.dropped)
	stopped.applied.Store(20)
	k := &kind{keepFor: 200 * time.Millisecond, tracking: map[string]time.Time{}, first: sets.New[string](), stubbed: sets.New[string]()}
	k.owners.Store(&owners{})
	r := &registration{k: k, per: map[*space]toolscache.ResourceEventHandlerRegistration{}}
	k.handlers = []*registration{r}
	now := time.Now()
	// Right after, and once no longer waited for (then only an owner that
	// holds none of it and has passed it lets the record go).
	for _, after := range []time.Duration{0, (awaitKeepFors + 1) * k.keepFor} {
		r.mu.Lock()
		r.told = map[string]*toldIn{"ns-05": {from: stopped, owner: stopped, mark: 20,
			seen: map[string]told{"p1": {rv: "21"}, "p3": {rv: "12"}}, await: map[string]bool{"p1": true}}}
		r.mu.Unlock()
		k.mu.Lock()
		k.tracking["ns-05"] = now
		k.endTrackingLocked(now.Add(after))
		k.mu.Unlock()
		r.mu.Lock()
		n := len(r.told)
		r.mu.Unlock()
		if n != 0 {
			t.Errorf("%v after the handover, the record of a namespace whose owner stopped is still kept", after)
		}
	}
}

// The schedule that found it, replayed: seed 481 (it failed in about 3
// replays of 8 before the fix), run eight times at once. Only that defect
// fails the test; another, open one a run may meet is logged.
func TestTheStoppedOwnerScheduleReplayed(t *testing.T) {
	quietKlog(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for run := range 8 {
		wg.Go(func() {
			err := runSchedule(481, nil)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
			case strings.Contains(err.Error(), "the record of what handlers were told still holds"):
				t.Errorf("seed 481, run %d: %v", run+1, err)
			default:
				t.Logf("seed 481, run %d, another defect: %v", run+1, err)
			}
		})
	}
	wg.Wait()
}
