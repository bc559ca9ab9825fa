package scopedcache

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A claim made while the old owner's delivery of a pod to a handler has
// been handed the pod and not yet checked against the owner. The
// cluster-wide informer tells ns-00 (no record of what was told left) and
// is handed a pod written there; before its delivery to one handler is
// checked against the owner, ns-00 stops being needed, the cluster-wide
// informer stubs a pod written then, and a read of ns-00 starts its own
// informer, which claims it (claimLocked). The claim recorded the pod as
// told (the handler had been handed its version), the delivery then found
// another owner and dropped it, and the own informer's Add of that version
// counted as told already: the handler was never told the pod, seed 592's
// "handler 0 holds ns-12/p0 at "", the apiserver at 8". A claim now waits
// for a delivery between being handed an event and that check (claimMu).
func TestAClaimWaitsForTheOldOwnersDeliveryUnderWay(t *testing.T) {
	s := newScriptWith(t, Options{KeepFor: 2 * time.Second}, map[string]int{"ns-00": 2}, []string{"ns-00"}, nil)
	all := clusterWideUntracked(t, s)

	// The cluster-wide informer's delivery of a new pod to one handler
	// waits once handed it.
	pause, reached, release := pauseOnce(all, "ns-00", "p5")
	s.handed.Store(&pause)
	s.api.write("ns-00", "p5", false)
	awaitClosed(t, reached, "the cluster-wide informer was not handed ns-00/p5")

	// Meanwhile ns-00 is not needed, and the cluster-wide informer stubs
	// a pod written then.
	stubNotNeeded(t, s)

	// A read of ns-00 starts its own informer, which claims it; the
	// delivery goes on once the claim is made, or after half a second (the
	// informer started for the read outlives it by its keep time).
	read := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var pods corev1.PodList
		read <- s.c.List(ctx, &pods, client.InNamespace("ns-00"))
	}()
	claimed := func() bool {
		o := s.k.ownerOf("ns-00")
		return o != nil && o != all
	}
	for deadline := time.Now().Add(500 * time.Millisecond); !claimed() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	close(release)
	if err := <-read; err != nil {
		t.Fatalf("the read of ns-00: %v", err)
	}
	if !claimed() {
		t.Fatalf("the read did not claim ns-00 for its own informer")
	}

	s.need["ns-00"] = true
	s.publishNeeds()
	s.k.pokeRun()
	s.eventually(t, "after the claim", s.converged)
	if err := s.check(); err != nil {
		t.Fatal(err)
	}
}

// An event of the old owner past the owner check when a claim is made is
// told before any of the claimant's. The cluster-wide informer's delivery
// of a pod to one handler waits after that check; meanwhile ns-00 stops
// being needed, the cluster-wide informer stubs a pod written then, and
// ns-00, needed again, gets an informer of its own that claims it as it
// starts (joinLocked), and lists once the pod has a newer version. Its
// initial Add of the pod reached the handler as an update of a pod it had
// not been told yet, and the delivery under way then told it the older
// version (without the per-namespace lock of deliveries, tellLock, 2 runs
// of 3 failed: "handler 0 holds ns-00/p5 at "4", the apiserver at 6
// [updated 6 added 4]"; in the third the own informer's handover, waiting
// for the delivery lock, held its Add back).
func TestAnEventPastTheOwnerCheckIsToldBeforeTheClaimants(t *testing.T) {
	s := newScriptWith(t, Options{KeepFor: 2 * time.Second}, map[string]int{"ns-00": 2}, []string{"ns-00"}, nil)
	all := clusterWideUntracked(t, s)

	pause, reached, release := pauseOnce(all, "ns-00", "p5")
	s.telling.Store(&pause)
	s.api.write("ns-00", "p5", false)
	awaitClosed(t, reached, "the cluster-wide informer's delivery of ns-00/p5 did not pass the owner check")

	stubNotNeeded(t, s)
	s.api.refuse("ns-00", true)
	s.need["ns-00"] = true
	s.publishNeeds()
	s.k.pokeRun()
	s.eventually(t, "ns-00's own informer claims it", func() error {
		if o := s.k.ownerOf("ns-00"); o == nil || o == all {
			return fmt.Errorf("ns-00 is still told by the cluster-wide informer")
		}
		return nil
	})
	s.api.write("ns-00", "p5", false)
	s.api.refuse("ns-00", false)
	// Its own informer's Add of the new version waits for the delivery
	// under way, or reaches the handler (the defect) once it has listed.
	own := s.k.ownerOf("ns-00")
	s.eventually(t, "ns-00's own informer lists", func() error {
		if !isClosed(own.synced) {
			return fmt.Errorf("not synced")
		}
		return nil
	})
	time.Sleep(100 * time.Millisecond)
	close(release)

	s.eventually(t, "after the claim", s.converged)
	if err := s.check(); err != nil {
		t.Fatal(err)
	}
}

// clusterWideUntracked takes ns-00 to the cluster-wide informer, and waits
// for the record of what handlers were told of it to end.
func clusterWideUntracked(t *testing.T, s *schedule) (all *space) {
	t.Helper()
	s.needFirst(ClusterWideAbove + 1)
	s.eventually(t, "the switch", s.handedToAll("ns-00"))
	s.k.mu.Lock()
	all = s.k.spaces[allNamespaces]
	s.k.mu.Unlock()
	s.eventually(t, "the record of ns-00 ends", func() error {
		s.k.mu.Lock()
		defer s.k.mu.Unlock()
		for i, r := range s.k.handlers {
			if r.tracks("ns-00") {
				return fmt.Errorf("handler %d's deliveries of ns-00 are still checked", i)
			}
		}
		return nil
	})
	return all
}

// stubNotNeeded makes ns-00 not needed and waits for the cluster-wide
// informer to stub a pod written then.
func stubNotNeeded(t *testing.T, s *schedule) {
	t.Helper()
	s.need["ns-00"] = false
	s.publishNeeds()
	s.k.pokeRun()
	s.eventually(t, "ns-00 not needed", func() error {
		if s.k.neededHas("ns-00") {
			return fmt.Errorf("still needed")
		}
		return nil
	})
	s.api.write("ns-00", "p9", false)
	s.eventually(t, "the cluster-wide informer stubs ns-00", func() error {
		if !s.k.isStubbed("ns-00") {
			return fmt.Errorf("not stubbed")
		}
		return nil
	})
}

// A namespace's own informer that never synced, stopped while a
// cluster-wide informer ran, left its namespace to nothing, not to the
// cluster-wide informer: that informer had listed the namespace while the
// own one owned it, its Adds dropped but counted as handed, and a space of
// the namespace started later counted them as told (trackLocked), so
// handlers were never told those pods. The path of seed 592 (a debug
// trace of a failing replay: "handler 0 holds ns-03/p3 at "", the
// apiserver at 27 []"): ns-00's own informer cannot list; the kind goes
// cluster-wide and back below the threshold before the cluster-wide
// informer has synced (ns-02, needed then, keeps it running: its own
// informer cannot list either); the cluster-wide informer lists ns-00;
// ns-00's own informer, not needed, is stopped (not synced in keepFor),
// and ns-00 is needed again.
func TestAStoppedOwnersNamespaceIsToldAnew(t *testing.T) {
	s := newScriptWith(t, Options{}, map[string]int{"ns-00": 2}, []string{"ns-01"}, nil)
	s.api.refuse("ns-00", true)
	s.need["ns-00"] = true
	s.publishNeeds()
	s.k.pokeRun()
	var own *space
	s.eventually(t, "ns-00's own informer starts", func() error {
		s.k.mu.Lock()
		defer s.k.mu.Unlock()
		if own = s.k.spaces["ns-00"]; own == nil || s.k.ownerOf("ns-00") != own {
			return fmt.Errorf("ns-00 has no informer of its own owning it")
		}
		return nil
	})

	// Cluster-wide, and back below the threshold before its informer has
	// listed.
	s.api.setListDelay(300 * time.Millisecond)
	s.api.refuse("ns-02", true)
	s.needFirst(ClusterWideAbove + 1)
	var all *space
	s.eventually(t, "the cluster-wide informer starts", func() error {
		s.k.mu.Lock()
		defer s.k.mu.Unlock()
		if all = s.k.spaces[allNamespaces]; all == nil {
			return fmt.Errorf("no cluster-wide informer")
		}
		return nil
	})
	clear(s.need)
	for _, ns := range []string{"ns-00", "ns-01", "ns-02"} {
		s.need[ns] = true
	}
	s.publishNeeds()
	s.k.pokeRun()
	s.eventually(t, "the cluster-wide informer lists", func() error {
		if !isClosed(all.synced) {
			return fmt.Errorf("not synced")
		}
		for i, r := range s.k.handlers {
			if r.toldUpTo(all) == 0 {
				return fmt.Errorf("handler %d has been handed nothing of it", i)
			}
		}
		return nil
	})
	s.api.setListDelay(0)
	if s.k.ownerOf("ns-00") != own {
		t.Fatalf("ns-00 was handed over before its own informer stopped")
	}

	// Not needed, ns-00's own informer stops; needed again, a new one
	// tells it.
	s.need["ns-00"] = false
	s.publishNeeds()
	s.k.pokeRun()
	s.eventually(t, "ns-00's own informer stops", func() error {
		s.k.mu.Lock()
		defer s.k.mu.Unlock()
		if s.k.spaces["ns-00"] != nil {
			return fmt.Errorf("still running")
		}
		return nil
	})
	s.api.refuse("ns-00", false)
	s.api.refuse("ns-02", false)
	s.need["ns-00"] = true
	s.publishNeeds()
	s.k.pokeRun()
	s.eventually(t, "ns-00 needed again", s.converged)
	if err := s.check(); err != nil {
		t.Fatal(err)
	}
}

// pauseOnce is a delivery hook (schedule.handed, schedule.telling) that
// holds the first event of namespace/name the space sp delivers until
// release is closed; reached is closed once it holds it.
func pauseOnce(sp *space, namespace, name string) (hook func(*space, string, string), reached, release chan struct{}) {
	reached, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	hook = func(at *space, ns, n string) {
		if at == sp && ns == namespace && n == name {
			once.Do(func() {
				close(reached)
				<-release
			})
		}
	}
	return hook, reached, release
}

// awaitClosed fails t with why unless ch is closed within 10 s.
func awaitClosed(t *testing.T, ch chan struct{}, why string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal(why)
	}
}
