package apps

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
type expectations struct {
	mu  sync.Mutex
	now func() time.Time
	m   map[types.UID]*expectation
}

type expectation struct {
	name      types.NamespacedName
	creations int
	deletions map[string]struct{} // pod names
	// unsure names the pods whose creation failed in a way that leaves
	// open whether the apiserver made them (a timeout, a connection cut
	// while etcd restarts): they count among the creations until the cache
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
	if x.creations <= 0 && len(x.deletions) == 0 {
		return true
	}
	return e.now().Sub(x.since) > expectationsTTL
}

// expect records writes about to be made. It replaces whatever was recorded
// for the PodSet before (it is only called once that is satisfied) and drops
// what an earlier PodSet of the same name left behind.
func (e *expectations) expect(uid types.UID, name types.NamespacedName, creations int, deletions []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for other, x := range e.m {
		if x.name == name && other != uid {
			delete(e.m, other)
		}
	}
	x := &expectation{name: name, creations: creations, deletions: make(map[string]struct{}, len(deletions)), since: e.now()}
	for _, d := range deletions {
		x.deletions[d] = struct{}{}
	}
	e.m[uid] = x
}

// creationObserved lowers the creations outstanding by one: the cache showed
// the named pod, new, or its creation failed and it will never show.
func (e *expectations) creationObserved(uid types.UID, pod string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[uid]; ok {
		x.creations--
		delete(x.unsure, pod)
	}
}

// creationUnsure records that the named pod's creation failed in a way that
// leaves open whether it exists: it stays outstanding (see unsure).
func (e *expectations) creationUnsure(uid types.UID, pod string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[uid]; ok {
		if x.unsure == nil {
			x.unsure = map[string]struct{}{}
		}
		x.unsure[pod] = struct{}{}
	}
}

// dropUnsure forgets the doubt about the named pod without counting it: the
// cache shows it, so its creation was or is about to be observed.
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
