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
	s.needFirst(ClusterWideAbove + 1)
	s.eventually(t, "the switch", s.handedToAll("ns-00"))
	s.k.mu.Lock()
	all := s.k.spaces[allNamespaces]
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

	// The cluster-wide informer's delivery of a new pod to one handler
	// waits once handed it.
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	pause := func(sp *space, namespace, name string) {
		if sp == all && namespace == "ns-00" && name == "p5" {
			once.Do(func() {
				close(reached)
				<-release
			})
		}
	}
	s.handed.Store(&pause)
	s.api.write("ns-00", "p5", false)
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the cluster-wide informer was not handed ns-00/p5")
	}

	// Meanwhile ns-00 is not needed, and the cluster-wide informer stubs
	// a pod written then.
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
