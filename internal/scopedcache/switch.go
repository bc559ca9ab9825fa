package scopedcache

// The switch: which namespaces move between their own informers and the
// cluster-wide one (plan), and when the record of what handlers were told
// across a move may end.

import (
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// move is a namespace to hand over to a space.
type move struct {
	namespace string
	to        *space
}

// plan starts the spaces needed and finds the namespaces due for a
// handover.
func (k *kind) plan(needed sets.Set[string], now time.Time) ([]move, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.neededNow.Store(ptrTo(needed.Clone()))
	switch {
	case needed.Len() > k.limits.clusterWideAbove:
		k.clusterWide = true
	case needed.Len() <= k.limits.perNamespaceAtMost:
		k.clusterWide = false
	}
	if k.clusterWide {
		// The cluster-wide space holds them all, but for the needed
		// namespaces it holds stubs of (stubs.go): those keep their own.
		wanted := sets.New(allNamespaces)
		for ns := range needed {
			if k.isStubbed(ns) || k.untoldLocked(ns) {
				// And those nothing tells (disown): their own tells them
				// from its start, and hands them over once synced.
				wanted.Insert(ns)
			}
		}
		needed = wanted
	}
	for ns := range needed {
		if _, ok := k.spaces[ns]; !ok {
			if _, err := k.startLocked(ns); err != nil {
				return nil, err
			}
		}
	}
	for ns, s := range k.spaces {
		switch {
		case needed.Has(ns):
			s.needed = true
		case s.needed:
			s.needed, s.unneededSince = false, now
		}
	}
	return k.movesLocked(), nil
}

// movesLocked finds the namespaces due for a handover: to their own
// synced spaces, or, cluster-wide, to the cluster-wide space once it
// synced, but for those it holds stubs of. k.mu is held.
func (k *kind) movesLocked() []move {
	var moves []move
	all := k.spaces[allNamespaces]
	for ns, s := range k.spaces {
		switch {
		case ns == allNamespaces || !isClosed(s.synced) && !k.clusterWide:
		case s.claimed:
			if isClosed(s.synced) && k.ownerOf(ns) == s {
				moves = append(moves, move{namespace: ns, to: s})
			}
		case k.clusterWide && k.isStubbed(ns):
			if isClosed(s.synced) && k.ownerOf(ns) != s {
				moves = append(moves, move{namespace: ns, to: s})
			}
		case k.clusterWide:
			if all != nil && isClosed(all.synced) && k.ownerOf(ns) == s {
				moves = append(moves, move{namespace: ns, to: all})
			}
		case k.ownerOf(ns) != s:
			moves = append(moves, move{namespace: ns, to: s})
		}
	}
	return moves
}

// dropDoneLocked stops the spaces no longer needed and ends the tracking
// of switches long over (endTrackingLocked). k.mu is held.
func (k *kind) dropDoneLocked(now time.Time) {
	all := k.spaces[allNamespaces]
	for ns, s := range k.spaces {
		switch {
		case ns == allNamespaces:
			if !k.clusterWide && k.perNamespaceOwnLocked() {
				k.dropLocked(s)
			}
		case k.clusterWide && !k.isStubbed(ns):
			// Handed over (or never owning): the cluster-wide space tells
			// and answers for it.
			if all != nil && k.ownerOf(ns) != s {
				k.dropLocked(s)
			}
		case s.needed:
			// Its namespace's stubs leave it to this space.
		case !s.needed && now.Sub(s.unneededSince) >= k.keepFor && now.Sub(s.lastRead) >= k.keepFor:
			k.dropLocked(s)
		case !s.needed && !isClosed(s.synced) && now.Sub(s.startedAt) >= k.keepFor:
			// Read only, and not synced in keepFor (the apiserver is
			// away): its waiters get an error, the next read starts anew.
			k.dropLocked(s)
		}
	}
	k.endTrackingLocked(now)
}

// endTrackingLocked ends the tracking of switches long over, and that of
// spaces told from their start once they have synced and told every
// handler what they listed, with no switch under way. k.mu is held.
func (k *kind) endTrackingLocked(now time.Time) {
	all := k.spaces[allNamespaces]
	for ns, until := range k.tracking {
		own, owner := k.spaces[ns], k.ownerOf(ns)
		alone := owner != nil && isClosed(owner.synced) && (owner == own && (all == nil || k.isStubbed(ns)) || owner == all && own == nil)
		switch {
		case alone && k.first.Has(ns) && k.toldAllLocked(owner):
			// Told from its owner's start, which has synced and told
			// every handler all it listed, and no switch under way (a
			// namespace the cluster-wide space holds stubs of stays with
			// its own): what the owner holds is what they were told, as
			// at the end of any tracking. The record (an entry per object
			// per handler) goes now, not a keepFor later (issue 26: some
			// 100 bytes a Job in the first minute).
		case until.IsZero() && alone:
			// Synced, but a handler still works through the initial
			// list (its space pokes run once all have it), or a switch
			// ended: the record goes a keepFor from now at the latest.
			k.tracking[ns] = now.Add(k.keepFor)
			continue
		case !until.IsZero() && !now.Before(until) && k.caughtUpLocked(ns, now.Before(until.Add(awaitKeepFors*k.keepFor))):
			// Caught up; what the owner was still to tell is waited for
			// awaitKeepFors keepFors at most: an object told that went
			// while the owner could not watch (its relist after a 410
			// skips it) is never told by it.
		default:
			continue
		}
		for _, r := range k.handlers {
			r.untrack(ns)
		}
		delete(k.tracking, ns)
		k.first.Delete(ns)
	}
}

// awaitKeepFors is how many keepFors after a switch its record waits at
// most for the owner to tell what it had not caught up with (toldIn.await):
// a relist behind an outage or a slow list takes longer than a keepFor of
// the tests (200 ms).
const awaitKeepFors = 10

// caughtUpLocked reports whether every handler has been handed all that
// namespace's owner had applied when it was handed the namespace, and,
// awaiting, what it had not caught up with then (toldIn.await): until then
// an event still queued for a slow handler (an Add it was told by the
// handover) could be told again. k.mu is held.
func (k *kind) caughtUpLocked(namespace string, awaiting bool) bool {
	for _, r := range k.handlers {
		r.mu.Lock()
		in := r.told[namespace]
		var mark uint64
		var owner *space
		var awaited []heldEntry
		if in != nil {
			mark, owner = in.mark, in.owner
			for name := range in.await {
				awaited = append(awaited, heldEntry{name: name, rv: in.seen[name].rv})
			}
		}
		pos := r.pos[owner]
		r.mu.Unlock()
		if owner == nil || isClosed(owner.dropped) {
			// No owner, or one stopped since, which tells nothing more:
			// nothing is to be waited for (a cluster-wide space stopped
			// back below the threshold before it told what it had not
			// caught up with kept the record for good).
			continue
		}
		if len(awaited) > 0 && !regress.relistOrder && (awaiting || !k.passedAll(owner, namespace, awaited)) {
			return false
		}
		reg, ok := r.per[owner]
		if ok && (!reg.HasSynced() || pos < mark) {
			return false
		}
	}
	return true
}

// passedAll reports whether s holds none of objects at the version told
// or later (whole, or a stub while the namespace is needed: it is made
// whole and told), and its store has caught up past each: it will not
// tell them. k.mu is held.
func (k *kind) passedAll(s *space, namespace string, objects []heldEntry) bool {
	needed := false
	if n := k.neededNow.Load(); n != nil {
		needed = n.Has(namespace)
	}
	upTo := s.seenUpTo()
	for _, t := range objects {
		if !atOrBeforeRV(t.rv, upTo) {
			return false
		}
	}
	for _, idx := range s.held.all() {
		for _, t := range objects {
			item, ok, err := idx.GetByKey(namespace + "/" + t.name)
			if o, isObj := item.(client.Object); err == nil && ok && isObj && (needed || !isStub(item)) && !newerRV(t.rv, o.GetResourceVersion()) {
				return false
			}
		}
	}
	return true
}

// toldAllLocked reports whether every handler has been told what s listed
// (its registration on s has synced). k.mu is held.
func (k *kind) toldAllLocked(s *space) bool {
	for _, r := range k.handlers {
		if reg, ok := r.per[s]; !ok || !reg.HasSynced() {
			return false
		}
	}
	return true
}

// perNamespaceOwnLocked reports whether every namespace with a space of
// its own is told from it. k.mu is held.
func (k *kind) perNamespaceOwnLocked() bool {
	for ns, s := range k.spaces {
		if ns != allNamespaces && k.ownerOf(ns) != s {
			return false
		}
	}
	return true
}
