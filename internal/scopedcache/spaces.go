package scopedcache

// A space's life: started, joined to the handlers, claiming its namespace,
// tracked across a switch, and stopped.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
)

// waitSynced waits for every space that exists now.
func (k *kind) waitSynced(ctx context.Context) {
	k.mu.Lock()
	spaces := make([]*space, 0, len(k.spaces))
	for _, s := range k.spaces {
		spaces = append(spaces, s)
	}
	k.mu.Unlock()
	for _, s := range spaces {
		select {
		case <-s.synced:
		case <-ctx.Done():
			return
		}
	}
}

func (k *kind) stopAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range k.spaces {
		k.dropLocked(s)
	}
}

// dropLocked stops a space and forgets it; a reader waiting for it to
// sync gets an error. k.mu is held.
func (k *kind) dropLocked(s *space) {
	s.stop()
	close(s.dropped)
	delete(k.spaces, s.namespace)
	for _, r := range k.handlers {
		delete(r.per, s)
	}
	k.disown(s)
	if k.onUntold != nil {
		k.onUntold(s.namespace)
	}
	for ns, until := range k.tracking {
		// A switch to s that never ended ends now; not one to a space
		// that claimed its namespace from the cluster-wide space, which
		// is still to be handed it (claimLocked).
		if until.IsZero() && (s.namespace == ns || s.namespace == allNamespaces && !k.ownerClaimed(ns)) {
			k.tracking[ns] = time.Now()
		}
	}
	gaugeNamespaces(k.gvk.Kind, k.spaces)
}

// ownerClaimed reports whether namespace is owned by a space that claimed it
// and is still to be handed it.
func (k *kind) ownerClaimed(namespace string) bool {
	o := k.ownerOf(namespace)
	return o != nil && o.claimed
}

// startLocked starts the informer of namespace, with every handler and
// index added before it lists. k.mu is held.
func (k *kind) startLocked(namespace string) (*space, error) {
	if k.ctx == nil {
		return nil, errors.New("scoped cache: read before the cache started")
	}
	if namespace == allNamespaces {
		k.resetStubbed()
	}
	held := &heldStores{}
	c, err := k.newCache(namespace, held)
	if err != nil {
		return nil, fmt.Errorf("scoped cache of %s in %q: %w", k.gvk.Kind, namespace, err)
	}
	ctx, stop := context.WithCancel(k.ctx)
	inf, err := c.GetInformer(ctx, k.obj)
	if err != nil {
		stop()
		return nil, fmt.Errorf("scoped cache of %s in %q: %w", k.gvk.Kind, namespace, err)
	}
	for _, ix := range k.indexers {
		if err := c.IndexField(ctx, k.obj, ix.field, k.indexable(ix.extract)); err != nil {
			stop()
			return nil, fmt.Errorf("scoped cache of %s in %q: index %s: %w", k.gvk.Kind, namespace, ix.field, err)
		}
	}
	for _, ix := range k.rawIndexers {
		if err := inf.AddIndexers(k.indexableRaw(ix)); err != nil {
			stop()
			return nil, fmt.Errorf("scoped cache of %s in %q: %w", k.gvk.Kind, namespace, err)
		}
	}
	s := &space{namespace: namespace, cache: c, informer: inf, held: held, stop: stop,
		synced: make(chan struct{}), dropped: make(chan struct{}), needed: true, startedAt: time.Now()}
	for _, r := range k.handlers {
		if err := r.add(s); err != nil {
			stop()
			return nil, err
		}
	}
	k.joinLocked(s)
	go func() { _ = c.Start(ctx) }()
	go func() {
		// The informer's own signal, not the cache's WaitForCacheSync,
		// which polls every 100 ms: a new namespace's first reconcile
		// waits on this.
		select {
		case <-inf.HasSyncedChecker().Done():
			close(s.synced)
			k.pokeRun() // a handover may be due
		case <-ctx.Done():
			return
		}
		// Once every handler has been told what it listed, the record of
		// what they were told may go (endTrackingLocked).
		k.mu.Lock()
		regs := make([]toolscache.ResourceEventHandlerRegistration, 0, len(k.handlers))
		for _, r := range k.handlers {
			if reg, ok := r.per[s]; ok {
				regs = append(regs, reg)
			}
		}
		k.mu.Unlock()
		for _, reg := range regs {
			select {
			case <-reg.HasSyncedChecker().Done():
			case <-ctx.Done():
				return
			}
		}
		k.pokeRun()
	}()
	k.spaces[namespace] = s
	gaugeNamespaces(k.gvk.Kind, k.spaces)
	return s, nil
}

// joinLocked makes a new space, before it lists, the owner of the
// namespaces nothing tells yet, and starts tracking what handlers were told
// of those it will take over. k.mu is held.
func (k *kind) joinLocked(s *space) {
	o := k.owners.Load()
	if s.namespace != allNamespaces {
		if from := o.of(s.namespace); from != nil {
			if from.namespace == allNamespaces && k.isStubbed(s.namespace) {
				// The cluster-wide space holds stubs of it, and would tell
				// only what changed since it was needed: the new space
				// tells it from its start, reads and events alike.
				k.claimLocked(s)
			} else {
				k.trackLocked(s.namespace, from)
			}
		} else if regress.untrackedFirst {
			k.setOwner(s.namespace, s)
		} else {
			// Told from its first event: a switch away from it before it
			// syncs (the cluster-wide space joining) knows what it told,
			// which what it holds would not say (objectsIn answers nothing
			// for an unsynced space, though its first Adds went out).
			k.setOwner(s.namespace, s)
			for _, r := range k.handlers {
				r.track(s.namespace, nil, nil, nil)
			}
			k.tracking[s.namespace] = time.Time{}
			k.first.Insert(s.namespace)
		}
		return
	}
	if o.all == nil {
		k.setOwner(allNamespaces, s)
	}
	for ns, from := range o.byNS {
		if from != nil {
			k.trackLocked(ns, from)
		}
	}
}

// claimLocked makes s, the space of its own namespace, the owner of the
// namespace in place of the cluster-wide space, which holds stubs of it:
// s tells the namespace and answers its reads from now on, and once
// synced is handed it (what it holds and was never told is told then, and
// what was told and is gone told deleted). A space claims its namespace
// as it starts (joinLocked), or, started while the cluster-wide space
// still held the namespace whole (back below the threshold, or handed
// over to it), once that space has stubbed it since (the namespace not
// needed for a moment) and the namespace is read: the cluster-wide space
// cannot answer the read, and s cannot answer it while another space
// tells the namespace. Its events are checked against what was told: the
// cluster-wide space may have told a version s has yet to. The record and
// the change of owner are one instant for deliveries (claimMu): a delivery
// handed an event is checked against the owner and recorded before the
// claim, or handed it after. A delivery does not hold claimMu while it
// tells the handler, which may read the cache and so claim. k.mu is held.
func (k *kind) claimLocked(s *space) {
	k.claimMu.Lock()
	defer k.claimMu.Unlock()
	from := k.ownerOf(s.namespace)
	if from != nil && from != s {
		k.trackLocked(s.namespace, from)
		for _, r := range k.handlers {
			r.mu.Lock()
			if in := r.told[s.namespace]; in != nil && in.from == s {
				in.from = from
			}
			r.mu.Unlock()
		}
	}
	k.setOwner(s.namespace, s)
	s.claimed = true
}

// trackLocked starts checking the deliveries of namespace, told being what
// from holds. k.mu is held.
func (k *kind) trackLocked(namespace string, from *space) {
	objs := k.objectsIn(from, namespace)
	for _, r := range k.handlers {
		if reg, ok := r.per[from]; ok && reg.HasSynced() {
			// What from holds, but what r's queue still holds of it:
			// from tells it before the handover, and the handover what
			// it has not.
			upTo := r.toldUpTo(from)
			told := make([]heldEntry, 0, len(objs))
			var unsure map[string]bool
			for _, h := range objs {
				if v, err := strconv.ParseUint(h.rv, 10, 64); err == nil && v <= upTo {
					told = append(told, h)
				} else if err == nil {
					// Told an older version, or nothing: known once
					// from tells this one (a handover waits for it).
					if unsure == nil {
						unsure = map[string]bool{}
					}
					unsure[h.name] = true
				}
			}
			r.track(namespace, from, told, unsure)
			continue
		}
		// A handler added since from listed is still being told what from
		// holds: what it was told of it so far is recorded (its first
		// initial Add started the record), and none is nothing.
		r.track(namespace, from, nil, nil)
	}
	k.tracking[namespace] = time.Time{}
	k.first.Delete(namespace) // a switch: tracked until a keepFor after it
}

// wait waits for the space to sync, for ctx, or for the space to stop.
func (s *space) wait(ctx context.Context) error {
	if isClosed(s.synced) {
		return nil
	}
	select {
	case <-s.synced:
		return nil
	case <-s.dropped:
		return fmt.Errorf("the cache of %s stopped before it synced (not needed, and not read, for too long)", s.describe())
	case <-ctx.Done():
		return fmt.Errorf("waiting for the cache of %s: %w", s.describe(), ctx.Err())
	}
}

func (s *space) describe() string {
	if s.namespace == allNamespaces {
		return "all namespaces"
	}
	return fmt.Sprintf("namespace %q", s.namespace)
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
