package podset

import (
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// expectationsTTL bounds how long a PodSet waits for the cache to show its
// own writes. Past it the controller trusts the cache again, so a lost watch
// event can delay a PodSet but never wedge it (the ReplicaSet controller uses
// the same five minutes).
const expectationsTTL = 5 * time.Minute

// expectations remember, per PodSet UID, the pod creations and deletions the
// controller has made but not yet seen in its cache. While any are
// outstanding the cache is known to be behind, and the controller does not
// create or delete on its word: this is what keeps a lagging cache from
// producing extra pods.
//
// Keys are UIDs, not names: a PodSet deleted and recreated under the same
// name is a different PodSet, and must neither inherit the old one's
// outstanding writes nor be blocked by them.
//
// Within a PodSet, creations and deletions are recorded by pod name, never
// counted: the controller names its pods before it creates them, so an
// event is matched to the write it answers. An event seen twice (two
// informers delivering one namespace while the cache switches between
// them, an informer's initial list replaying pods as Adds, a relist) or an
// event for a pod no longer waited for (a creation settled as never made
// whose pod shows up late) changes nothing. A counter, met by any Add of
// the set, was met at about half of a 300-pod scale-up while two informers
// delivered its namespace, and the next sync created 12 pods too many.
type expectations struct {
	mu  sync.Mutex
	now func() time.Time
	m   map[types.UID]*expectation
}

type expectation struct {
	name      types.NamespacedName
	creations map[string]struct{} // pod names
	deletions map[string]struct{} // pod names
	// unsure names the pods whose creation failed in a way that leaves
	// open whether the apiserver made them (a timeout, a connection cut
	// while etcd restarts): they stay among the creations until the cache
	// shows them or the apiserver says they do not exist.
	unsure map[string]struct{}
	since  time.Time
}

func newExpectations(now func() time.Time) *expectations {
	return &expectations{now: now, m: map[types.UID]*expectation{}}
}

// satisfied reports whether the cache has caught up with every write made for
// the PodSet, or the writes are too old to wait for.
func (e *expectations) satisfied(uid types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.m[uid]
	if !ok {
		return true
	}
	if len(x.creations) == 0 && len(x.deletions) == 0 {
		return true
	}
	return e.now().Sub(x.since) > expectationsTTL
}

// expect records writes about to be made: the pods to be created and
// deleted, by name. It replaces whatever was recorded for the PodSet before
// (it is only called once that is satisfied) and drops what an earlier
// PodSet of the same name left behind.
func (e *expectations) expect(uid types.UID, name types.NamespacedName, creations, deletions []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for other, x := range e.m {
		if x.name == name && other != uid {
			delete(e.m, other)
		}
	}
	e.m[uid] = &expectation{name: name, creations: setOf(creations), deletions: setOf(deletions), since: e.now()}
}

func setOf(names []string) map[string]struct{} {
	s := make(map[string]struct{}, len(names))
	for _, n := range names {
		s[n] = struct{}{}
	}
	return s
}

// creationObserved stops waiting for the named pod's creation: the cache
// showed it, or its creation failed and it will never show. A name not
// waited for (seen before, or never expected) changes nothing.
func (e *expectations) creationObserved(uid types.UID, pod string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[uid]; ok {
		delete(x.creations, pod)
		delete(x.unsure, pod)
	}
}

// renamed replaces an expected creation by one under a new name: the first
// name was taken, and the pod is created again under another.
func (e *expectations) renamed(uid types.UID, from, to string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[uid]; ok {
		if _, waited := x.creations[from]; waited {
			delete(x.creations, from)
			x.creations[to] = struct{}{}
		}
	}
}

// creationUnsure records that the named pod's creation failed in a way that
// leaves open whether it exists: it stays outstanding (see unsure).
func (e *expectations) creationUnsure(uid types.UID, pod string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[uid]; ok {
		if _, waited := x.creations[pod]; !waited {
			return // the cache showed it already
		}
		if x.unsure == nil {
			x.unsure = map[string]struct{}{}
		}
		x.unsure[pod] = struct{}{}
	}
}

// dropUnsure forgets the doubt about the named pod and keeps waiting for it:
// the cache shows it, so the pod informer's handler observed its creation or
// is about to.
func (e *expectations) dropUnsure(uid types.UID, pod string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[uid]; ok {
		delete(x.unsure, pod)
	}
}

// unsure returns the pods of the PodSet whose creation is in doubt.
func (e *expectations) unsure(uid types.UID) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[uid]; ok {
		return slices.Sorted(maps.Keys(x.unsure))
	}
	return nil
}

// deletionObserved forgets the deletion of the named pod: the cache showed it
// going, or the deletion failed. Seeing the same pod go twice (marked for
// deletion, then removed) counts once.
func (e *expectations) deletionObserved(uid types.UID, pod string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[uid]; ok {
		delete(x.deletions, pod)
	}
}

// forget drops everything recorded for PodSets with this name: they are gone.
func (e *expectations) forget(name types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	maps.DeleteFunc(e.m, func(_ types.UID, x *expectation) bool { return x.name == name })
}
