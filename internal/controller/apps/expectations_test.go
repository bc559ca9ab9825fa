package apps

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestExpectations(t *testing.T) {
	clock := t0
	e := newExpectations(func() time.Time { return clock })
	web := types.NamespacedName{Namespace: "ns", Name: "web"}

	if !e.satisfied("uid-1") {
		t.Fatal("a PodSet never seen must be satisfied")
	}
	e.expect("uid-1", web, 2, []string{"web-a"})
	e.creationObserved("uid-1")
	e.deletionObserved("uid-1", "web-a")
	e.deletionObserved("uid-1", "web-a") // marked, then removed: counts once
	if e.satisfied("uid-1") {
		t.Fatal("satisfied with one creation outstanding")
	}
	e.creationObserved("uid-1")
	if !e.satisfied("uid-1") {
		t.Fatal("not satisfied after every write was observed")
	}

	// Recreated under the same name: the new UID starts clean and is not
	// held up by the old one's outstanding writes.
	e.expect("uid-1", web, 3, nil)
	if !e.satisfied("uid-2") {
		t.Fatal("a recreated PodSet inherited its predecessor's expectations")
	}
	e.expect("uid-2", web, 1, nil)
	if _, ok := e.m["uid-1"]; ok {
		t.Error("the old PodSet's record outlived its successor's first write")
	}
	if e.satisfied("uid-2") {
		t.Fatal("satisfied with a creation outstanding")
	}

	// A lost event delays, but never wedges, a PodSet.
	clock = clock.Add(expectationsTTL + time.Second)
	if !e.satisfied("uid-2") {
		t.Fatal("expectations never expire")
	}

	e.forget(web)
	if len(e.m) != 0 {
		t.Errorf("forget left %d records", len(e.m))
	}
}
