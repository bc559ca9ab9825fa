package scopedcache

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A namespace's own informer started while the cluster-wide one still
// told the namespace whole (back below the threshold, its own informer not
// synced yet), then the cluster-wide one stubbed the namespace (not needed
// for a moment, a pod written): a read of the namespace is answered by the
// informer whose events handlers are told, which the own informer becomes
// (claimLocked). It answered the read while the cluster-wide one told the
// namespace: the path of seed 2761 (TestTheStubbedReadSchedulesReplayed),
// each step waited for. Once the own informer syncs, the handler is told
// no pod again: the cluster-wide informer, stopped once every namespace's
// own told it, no longer ends the record of the namespace claimed from it.
func TestAReadOfANamespaceStubbedAfterItsInformerStartedIsAnsweredByItsOwner(t *testing.T) {
	s := newScriptWith(t, Options{KeepFor: 5 * time.Second}, map[string]int{"ns-00": 2}, []string{"ns-00"}, nil)
	s.needFirst(ClusterWideAbove + 1)
	s.eventually(t, "the switch", s.handedToAll("ns-00"))

	// Back below the threshold, with ns-00's own informer unable to list:
	// the cluster-wide informer tells ns-00 until it has synced.
	s.api.refuse("ns-00", true)
	s.needFirst(PerNamespaceAtMost)
	var own *space
	s.eventually(t, "ns-00's own informer starts", func() error {
		s.k.mu.Lock()
		defer s.k.mu.Unlock()
		if own = s.k.spaces["ns-00"]; own == nil {
			return fmt.Errorf("no informer of ns-00")
		}
		return nil
	})
	if s.k.ownerOf("ns-00") == own || s.k.isStubbed("ns-00") {
		t.Fatalf("ns-00's own informer owns it before it synced, or it is stubbed already")
	}

	// Not needed for a moment: the cluster-wide informer stubs a pod
	// written meanwhile. Needed again, its own informer is still there.
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
	s.need["ns-00"] = true
	s.publishNeeds()
	s.k.pokeRun()
	s.eventually(t, "ns-00 needed again", func() error {
		s.k.mu.Lock()
		defer s.k.mu.Unlock()
		if s.k.spaces["ns-00"] != own || !own.needed {
			return fmt.Errorf("ns-00's own informer is not needed (or another)")
		}
		return nil
	})

	// Its own informer cannot list: the read waits for it a moment only.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var pods corev1.PodList
	_ = s.c.List(ctx, &pods, client.InNamespace("ns-00"))
	select {
	case msg := <-s.readErrs:
		t.Fatal(msg)
	default:
	}

	s.api.refuse("ns-00", false)
	s.eventually(t, "after the switch", s.converged)
	if err := s.check(); err != nil {
		t.Fatal(err)
	}
}

// The schedules that found the read of a namespace answered by its own
// informer while the cluster-wide one told it, replayed: seed 2761 (its own
// informer started while the cluster-wide one held the namespace whole,
// which stubbed it since), 1984 (its own informer handed the namespace over
// to the cluster-wide one, which stubbed it before the own one stopped),
// and 1281. A schedule's timing varies from run to run: each is run six
// times, at once (before the fix, seed 2761 failed in 3 to 5 of 6 runs,
// 1281 and 1984 in 0 or 1). Only that defect fails the test: past the
// read a schedule goes on, and can meet another, open one (1984 met a
// pod told deleted twice once under load), which is logged.
func TestTheStubbedReadSchedulesReplayed(t *testing.T) {
	quietKlog(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, seed := range []uint64{2761, 1984, 1281} {
		for run := range 6 {
			wg.Go(func() {
				err := runSchedule(seed, nil)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
				case strings.Contains(err.Error(), "was answered by the space of"):
					t.Errorf("seed %d, run %d: %v", seed, run+1, err)
				default:
					t.Logf("seed %d, run %d, another defect: %v", seed, run+1, err)
				}
			})
		}
	}
	wg.Wait()
}
