package scopedcache

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// backBelowWithOwnUnsynced takes ns-00 to the cluster-wide informer and
// back below the threshold with ns-00's own informer unable to list: the
// cluster-wide informer still tells ns-00, its own informer runs unsynced.
func backBelowWithOwnUnsynced(t *testing.T, s *schedule) (own *space) {
	t.Helper()
	s.needFirst(ClusterWideAbove + 1)
	s.eventually(t, "the switch", s.handedToAll("ns-00"))
	s.api.refuse("ns-00", true)
	s.needFirst(PerNamespaceAtMost)
	var all *space
	s.eventually(t, "ns-00's own informer starts", func() error {
		s.k.mu.Lock()
		defer s.k.mu.Unlock()
		if own = s.k.spaces["ns-00"]; own == nil {
			return fmt.Errorf("no informer of ns-00")
		}
		all = s.k.spaces[allNamespaces]
		return nil
	})
	if s.k.ownerOf("ns-00") != all {
		t.Fatalf("ns-00 is not told by the cluster-wide informer")
	}
	return own
}

// Back below the threshold, a read across namespaces is answered for each
// namespace by the informer whose events handlers are told, as a read of
// one namespace is: ns-00's own informer has not synced and has not been
// handed ns-00, so the cluster-wide one answers for ns-00. It read every
// needed namespace's own informer, and waited here for one that cannot
// list.
func TestAReadAcrossNamespacesIsAnsweredByEachNamespacesOwner(t *testing.T) {
	s := newScriptWith(t, Options{KeepFor: 5 * time.Second}, map[string]int{"ns-00": 2}, []string{"ns-00"}, nil)
	backBelowWithOwnUnsynced(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var pods corev1.PodList
	if err := s.c.List(ctx, &pods); err != nil {
		t.Fatalf("a read across namespaces: %v", err)
	}
	in := 0
	for _, p := range pods.Items {
		if p.Namespace == "ns-00" {
			in++
		}
	}
	if in != 2 {
		t.Fatalf("a read across namespaces holds %d pods of ns-00, want 2", in)
	}
	s.api.refuse("ns-00", false)
	s.eventually(t, "after the switch", s.converged)
	if err := s.check(); err != nil {
		t.Fatal(err)
	}
}

// A namespace nothing tells whose own informer runs, the cluster-wide
// informer running too: a read of it makes its own informer the owner
// (claimLocked) before that answers it. It answered the read while no
// informer's events reached handlers (claimed only when no cluster-wide
// informer ran). No path of the cache is known to leave the cluster-wide
// informer running and owning nothing; the state is made by hand here.
func TestAReadOfANamespaceNothingTellsIsAnsweredByItsOwner(t *testing.T) {
	s := newScriptWith(t, Options{KeepFor: 5 * time.Second}, map[string]int{"ns-00": 2}, []string{"ns-00"}, nil)
	own := backBelowWithOwnUnsynced(t, s)
	s.k.setOwner(allNamespaces, nil)
	if o := s.k.ownerOf("ns-00"); o != nil {
		t.Fatalf("ns-00 is told by the space of %s", o.describe())
	}
	s.api.refuse("ns-00", false)
	var pods corev1.PodList
	if err := s.c.List(context.Background(), &pods, client.InNamespace("ns-00")); err != nil {
		t.Fatal(err)
	}
	select {
	case msg := <-s.readErrs:
		t.Fatal(msg)
	default:
	}
	if s.k.ownerOf("ns-00") != own {
		t.Fatalf("ns-00 is not told by its own informer")
	}
}
