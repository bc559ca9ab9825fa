package scopedcache

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// One source per namespace.
//
// A namespace's events reach a handler from one space only: its owner, and
// reads of the namespace are answered by the owner too (kind.reader), so
// reads and events move at the same instant. While a namespace moves from
// one space to another (crossing the cluster-wide threshold, either way, or
// a read starting a namespace's informer while the cluster-wide one winds
// down) both informers run, but the new one's events (its initial list
// replayed as Adds among them) are dropped until it has synced. Then, with
// every delivery stopped, each handler is told the difference between what
// it was told and what the new informer holds (what it was never told as an
// initial list; what is gone as deleted, up to the version the new store has
// caught up with: seenUpTo), and the new space becomes the owner. Until
// keepFor after that, each handler's deliveries in the namespace are checked
// against what it was told (by resourceVersion, comparable since Kubernetes
// 1.35), so that an event still queued in either informer is not told twice
// or out of order. What was told is recorded as names and resourceVersions,
// not objects: an object is expanded only to be told.
//
// A namespace the cluster-wide space holds stubs of is the exception: that
// space would tell only what changed since the namespace was needed, so
// the namespace's own space tells it (and answers its reads) from its start,
// and is handed it, the difference told, once it has synced. An own space
// that started before the cluster-wide space stubbed its namespace claims
// it so at the first read (claimLocked). A namespace's own space that stops
// while it owns its namespace leaves it to nothing, never to a cluster-wide
// space whose events there were dropped (disown).

// owners maps each namespace to the space whose events reach handlers.
// It is replaced, never changed, and read without a lock.
type owners struct {
	byNS map[string]*space
	// all owns the namespaces byNS does not name; one byNS names nil is
	// nothing's (disown).
	all *space
}

func (o *owners) of(namespace string) *space {
	if s, ok := o.byNS[namespace]; ok {
		return s
	}
	return o.all
}

// ownerOf is the space whose events about namespace reach handlers.
func (k *kind) ownerOf(namespace string) *space { return k.owners.Load().of(namespace) }

// setOwner makes s the owner of namespace (of every namespace not owned by
// a namespace's own space when s is cluster-wide), or, with s nil, leaves
// namespace to the cluster-wide space (disown leaves it to nothing).
func (k *kind) setOwner(namespace string, s *space) {
	k.ownMu.Lock()
	defer k.ownMu.Unlock()
	old := k.owners.Load()
	o := &owners{byNS: make(map[string]*space, len(old.byNS)+1), all: old.all}
	for ns, x := range old.byNS {
		o.byNS[ns] = x
	}
	switch {
	case namespace == allNamespaces:
		o.all = s
	case s == nil || s.namespace == allNamespaces:
		delete(o.byNS, namespace)
	default:
		o.byNS[namespace] = s
	}
	k.owners.Store(o)
}

// disown removes s from the owners: the namespaces it owned have no owner
// from now on. A namespace's own space leaves its namespace to nothing,
// not to a cluster-wide space running: that space's events there were
// not told (another space owned it) though handed (toldUpTo), and a space
// joining later would count what it holds as told (trackLocked). The next
// space of the namespace tells it from its start (joinLocked).
func (k *kind) disown(s *space) {
	o := k.owners.Load()
	if s.namespace == allNamespaces {
		if o.all == s {
			k.setOwner(allNamespaces, nil)
		}
		return
	}
	if o.byNS[s.namespace] != s {
		return
	}
	if o.all == nil {
		k.setOwner(s.namespace, nil)
		return
	}
	k.ownMu.Lock()
	defer k.ownMu.Unlock()
	o = k.owners.Load()
	n := &owners{byNS: maps.Clone(o.byNS), all: o.all}
	n.byNS[s.namespace] = nil // nothing tells it
	k.owners.Store(n)
}

// untoldLocked reports whether nothing tells namespace though a
// cluster-wide space runs (disown). k.mu is held.
func (k *kind) untoldLocked(namespace string) bool {
	s, ok := k.owners.Load().byNS[namespace]
	return ok && s == nil
}

// told is what a handler was last told about one object of a tracked
// namespace: its resourceVersion (shared with the object the store holds),
// and whether it was told deleted. Objects are not kept: a namespace of
// 50,000 pods was some 165 MB of expanded copies, made under k.mu.
type told struct {
	rv   string
	gone bool
}

// toldIn is what a handler was told of one namespace, and the space that
// told it before the switch (nil for none): an object told there and
// changed or gone since is expanded from that space's store when the
// handler is told so.
type toldIn struct {
	from *space
	seen map[string]told
	// owner is the space a handover made the owner, and mark the latest
	// version it had applied then: the record may go once the handler has
	// been handed that (caughtUpLocked).
	owner *space
	mark  uint64
	// await names the objects the owner had not caught up with at the
	// handover: told alive at a version it did not hold yet, or told
	// deleted while it still held them. The owner still tells each (an
	// Add, the deletion), and the record may go only once it has told the
	// handler so, or holds nothing of it past that version
	// (caughtUpLocked). A relist hands its objects on in any order, so
	// the latest version r was handed (mark) can pass an old object of
	// the relist not yet handed on: told again as added with no record.
	await map[string]bool
	// unsure names the objects from held, when the record began, at a
	// version the handler had not been handed yet (trackLocked): its queue
	// on from still holds that version, and what it was told before (an
	// older version, or nothing) is known only once from tells it the
	// next. A handover waits for from to (handOver): told then, such an
	// object counted as never told and was told added again.
	unsure map[string]bool
}

type event int

const (
	added event = iota
	updated
	deleted
)

// delivery is a registration's handler on one space's informer: it passes
// on only the events of the namespaces that space owns.
type delivery struct {
	r *registration
	s *space
}

func (d delivery) OnAdd(obj any, initial bool) { d.r.deliver(d.s, added, nil, obj, initial) }
func (d delivery) OnUpdate(old, obj any)       { d.r.deliver(d.s, updated, old, obj, false) }
func (d delivery) OnDelete(obj any)            { d.r.deliver(d.s, deleted, nil, obj, false) }

func (r *registration) deliver(s *space, ev event, old, obj any, initial bool) {
	s.saw(obj)
	if isStub(obj) {
		r.mu.Lock()
		r.advance(s, obj)
		r.mu.Unlock()
		return // the namespace is nothing's (stubs.go)
	}
	if ev == updated && isStub(old) {
		// Whole again (its namespace is needed): the handler was never
		// told of the stub.
		ev, old = added, nil
	}
	k := r.k
	k.deliverMu.RLock()
	defer k.deliverMu.RUnlock()
	ns, name := keyOf(obj)
	// The handler is told ns's events one at a time, in the order they
	// passed the owner check: an event of the old owner that passed it
	// before a claim is told before any of the claimant's.
	tell := r.tellLock(ns)
	tell.Lock()
	defer tell.Unlock()
	if initial && !regress.untrackedFirst && k.ownerOf(ns) == s && !r.tracks(ns) {
		// The first the handler hears of ns from its owner: recorded from
		// here on, so that a switch starting before the owner has synced
		// (or told all it holds) knows what was told.
		k.trackFirst(r, s, ns)
	}
	ok := false
	// Handed, checked against the owner and recorded as told at one
	// instant for a claim (claimLocked), as for a handover (deliverMu):
	// an event handed and then dropped behind a change of owner would
	// count as told (toldUpTo) and never be.
	k.claimMu.RLock()
	r.mu.Lock()
	r.advance(s, obj)
	r.mu.Unlock()
	if k.onHanded != nil {
		k.onHanded(s, ns, name)
	}
	if k.ownerOf(ns) == s {
		r.mu.Lock()
		ev, old, obj, ok = r.checkLocked(s, ns, name, ev, old, obj)
		r.mu.Unlock()
	}
	k.claimMu.RUnlock()
	if ok {
		if k.onTelling != nil {
			k.onTelling(s, ns, name)
		}
		r.dispatch(ev, old, obj, initial)
	}
}

// tellLock is what r's deliveries of namespace hold from their owner check
// to the end of telling the handler. A claim does not take it: a handler
// being told an event may read the cache, and the read claim a namespace.
func (r *registration) tellLock(namespace string) *sync.Mutex {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.telling == nil {
		r.telling = map[string]*sync.Mutex{}
	}
	m := r.telling[namespace]
	if m == nil {
		m = &sync.Mutex{}
		r.telling[namespace] = m
	}
	return m
}

// tracks reports whether r's deliveries of namespace are checked against
// what it was told.
func (r *registration) tracks(namespace string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.told[namespace]
	return ok
}

// advance records that r has been handed obj's version by s. r.mu is
// held.
func (r *registration) advance(s *space, obj any) {
	o, ok := objectOf(obj)
	if !ok {
		return
	}
	rv, err := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
	if err != nil {
		return
	}
	if r.pos == nil {
		r.pos = map[*space]uint64{}
	}
	r.pos[s] = max(r.pos[s], rv)
}

// toldUpTo is the resourceVersion up to which r has been handed s's
// events: once r has been told s's list, an object s holds at a version
// no later than that was told to r; a later one may still wait in r's
// queue. r.mu is not held.
func (r *registration) toldUpTo(s *space) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pos[s]
}

// heldObject is what s holds of namespace/name, as held (compact or
// whole, not a stub), or a bare object of the kind with the name and
// resourceVersion a handler was told when s holds nothing of it.
func (k *kind) heldObject(s *space, namespace, name, rv string) client.Object {
	if s != nil {
		for _, idx := range s.held.all() {
			if item, ok, err := idx.GetByKey(namespace + "/" + name); err == nil && ok && !isStub(item) {
				if o, ok := item.(client.Object); ok && o.GetResourceVersion() == rv {
					return o
				}
			}
		}
	}
	o, err := k.scheme.New(k.gvk)
	co, ok := o.(client.Object)
	if err != nil || !ok {
		return &stub{name: name, namespace: namespace, resourceVersion: rv}
	}
	co.SetNamespace(namespace)
	co.SetName(name)
	co.SetResourceVersion(rv)
	return co
}

func (r *registration) dispatch(ev event, old, obj any, initial bool) {
	old, obj = r.k.expandAny(old), r.k.expandAny(obj)
	switch ev {
	case added:
		r.handler.OnAdd(obj, initial)
	case updated:
		r.handler.OnUpdate(old, obj)
	case deleted:
		r.handler.OnDelete(obj)
	}
}

// toldBy notes that s tells r of name (deleted, or o), what r was told
// of it being t: the owner has caught up with it once that is its
// deletion or a version no older than t.
func (in *toldIn) toldBy(s *space, name string, t told, deleted bool, o client.Object) {
	if s == nil || s != in.owner || !in.await[name] || regress.relistOrder {
		return
	}
	if deleted || o != nil && !newerRV(t.rv, o.GetResourceVersion()) {
		delete(in.await, name)
	}
}

// awaits notes, at a handover to an owner holding held (by name, its
// version), whether the owner is still to tell r of name, told t: told
// alive at a version it does not hold yet, or told deleted while it still
// holds it.
func (in *toldIn) awaits(name string, t told, held map[string]string) {
	rv, ok := held[name]
	if t.gone && ok || !t.gone && (!ok || newerRV(t.rv, rv)) {
		if in.await == nil {
			in.await = map[string]bool{}
		}
		in.await[name] = true
	}
}

// checkLocked decides whether an event about ns/name reaches the handler,
// and as what, from what the handler was told, in a tracked namespace. r.mu
// is held.
func (r *registration) checkLocked(s *space, ns, name string, ev event, old, obj any) (event, any, any, bool) {
	in, tracked := r.told[ns]
	if !tracked {
		return ev, old, obj, true
	}
	o, _ := objectOf(obj)
	t, known := in.seen[name]
	in.toldBy(s, name, t, ev == deleted, o)
	if s != nil && s == in.from && o != nil {
		delete(in.unsure, name)
		// The space that told the namespace before the switch, still its
		// owner: its events are the history the handler follows (one
		// still queued when tracking began among them), recorded as told.
		in.seen[name] = told{rv: o.GetResourceVersion(), gone: ev == deleted}
		return ev, old, obj, true
	}
	if ev == deleted {
		if known && t.gone {
			return ev, old, obj, false // told already
		}
		rv := t.rv
		if o != nil {
			rv = o.GetResourceVersion()
		}
		in.seen[name] = told{rv: rv, gone: true}
		return ev, old, obj, true
	}
	if o == nil {
		return ev, old, obj, true
	}
	rv := o.GetResourceVersion()
	switch {
	case !known:
		in.seen[name] = told{rv: rv}
		return added, nil, obj, true
	case !newerRV(rv, t.rv):
		return ev, old, obj, false // told already, or older than what was told
	case t.gone:
		in.seen[name] = told{rv: rv}
		return added, nil, obj, true
	default:
		in.seen[name] = told{rv: rv}
		if prev, ok := objectOf(old); !ok || prev.GetResourceVersion() != t.rv {
			// An Add from the new space, or an update from a version
			// the handler was not told: the old object is what it was.
			old = r.k.heldObject(in.from, ns, name, t.rv)
		}
		return updated, old, obj, true
	}
}

// track starts checking the deliveries of namespace against what was told,
// told being held, what from holds now (nil for nothing), but for unsure:
// objects from holds at a version r's queue on from still holds.
func (r *registration) track(namespace string, from *space, held []heldEntry, unsure map[string]bool) {
	seen := make(map[string]told, len(held))
	for _, h := range held {
		seen[h.name] = told{rv: h.rv}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.told == nil {
		r.told = map[string]*toldIn{}
	}
	if _, ok := r.told[namespace]; !ok {
		r.told[namespace] = &toldIn{from: from, seen: seen, unsure: unsure}
	}
}

// unsureOf reports whether a handler's record of namespace still names an
// object whose version r's queue on from holds (toldIn.unsure), from being
// the namespace's owner. k.mu is held.
func (k *kind) unsureOf(regs []*registration, namespace string, from *space) bool {
	if regress.laggingQueue {
		return false
	}
	for _, r := range regs {
		r.mu.Lock()
		in := r.told[namespace]
		pending := in != nil && in.from == from && len(in.unsure) > 0
		r.mu.Unlock()
		if pending {
			return true
		}
	}
	return false
}

// trackFirst starts checking r's deliveries of namespace, as told nothing
// yet, until a switch ends or the owner has synced (endTrackingLocked).
func (k *kind) trackFirst(r *registration, s *space, namespace string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ownerOf(namespace) != s {
		return // s stopped since: nothing would end the record
	}
	r.track(namespace, nil, nil, nil)
	if _, ok := k.tracking[namespace]; !ok {
		k.tracking[namespace] = time.Time{}
		k.first.Insert(namespace)
	}
}

func (r *registration) untrack(namespace string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.told, namespace)
}

// handOver makes to the owner of namespace once every delivery has stopped,
// telling each handler how what to holds differs from what it was told.
// An object told and missing from to is told deleted only if to has seen
// past it (else to lags and will tell it). Unless forced, it hands nothing
// over and reports false while a handler's record names an object whose
// version its queue on the old owner still holds (toldIn.unsure): what it
// was told of that object is known once the old owner has told it.
func (k *kind) handOver(namespace string, to *space, force bool) bool {
	k.deliverMu.Lock()
	defer k.deliverMu.Unlock()
	// Every handler of now: one added since the move was planned may have
	// been told the namespace by the old owner.
	k.mu.Lock()
	regs := slices.Clone(k.handlers)
	if from := k.ownerOf(namespace); from != nil && from != to && !regress.untrackedFirst {
		// A move back to a space that joined long ago (the cluster-wide
		// one, needed again before it went): what handlers were told is
		// what the owner had handed them, no deliveries being under way.
		k.trackLocked(namespace, from)
		if !force && k.unsureOf(regs, namespace, from) {
			k.mu.Unlock()
			return false
		}
	}
	k.mu.Unlock()
	held := k.objectsIn(to, namespace)
	lastRV, mark := seenBy(to, held)
	from := k.ownerOf(namespace)
	for _, r := range regs {
		var out []func()
		r.mu.Lock()
		in, ok := r.told[namespace]
		if !ok {
			// A handler added mid-switch: told only what deliveries since.
			in = &toldIn{from: from, seen: map[string]told{}}
			r.told[namespace] = in
		}
		in.owner, in.mark, in.await, in.unsure = to, mark, nil, nil
		present := make(map[string]string, len(held))
		for _, h := range held {
			present[h.name] = h.rv
			if ev, old, obj, ok := r.checkLocked(nil, namespace, h.name, added, nil, h.obj); ok {
				// What the handler was never told is told as the initial
				// list it is: a handler that does work per non-initial Add
				// (JobWatcher's history) does it once for the namespace.
				out = append(out, func() { r.dispatch(ev, old, obj, ev == added && !regress.replayNotInitial) })
			}
		}
		for name, t := range in.seen {
			in.awaits(name, t, present)
			if _, held := present[name]; t.gone || held || !atOrBeforeRV(t.rv, lastRV) {
				continue
			}
			delete(in.await, name)
			in.seen[name] = told{rv: t.rv, gone: true}
			obj := k.heldObject(in.from, namespace, name, t.rv)
			out = append(out, func() {
				r.dispatch(deleted, nil, toolscache.DeletedFinalStateUnknown{Key: namespace + "/" + name, Obj: obj}, false)
			})
		}
		r.mu.Unlock()
		for _, f := range out {
			f()
		}
	}
	k.setOwner(namespace, to)
	return true
}

// seenBy is how far to has seen, holding held of a namespace: lastRV, the
// version past which a deletion it does not show is one it has seen, and
// mark, the latest version it applied or holds.
func seenBy(to *space, held []heldEntry) (lastRV string, mark uint64) {
	lastRV, mark = to.seenUpTo(), to.applied.Load()
	for _, h := range held {
		if v, err := strconv.ParseUint(h.rv, 10, 64); err == nil {
			mark = max(mark, v)
		}
	}
	if regress.boundByHeld {
		lastRV = "0"
		for _, h := range held {
			if newerRV(h.rv, lastRV) {
				lastRV = h.rv
			}
		}
	}
	return lastRV, mark
}

// heldEntry is an object a space holds: its name and resourceVersion, and
// the object as held (compact for a compact kind: expanded only if a
// handler is told of it).
type heldEntry struct {
	name, rv string
	obj      client.Object
}

// objectsIn is what s holds in namespace, nothing if it has not synced;
// stubs were never told (stubs.go) and are left out. It reads the stores
// as they are: nothing is copied or expanded.
func (k *kind) objectsIn(s *space, namespace string) []heldEntry {
	if !isClosed(s.synced) {
		return nil
	}
	var out []heldEntry
	for _, idx := range s.held.all() {
		items, err := idx.ByIndex(toolscache.NamespaceIndex, namespace)
		if err != nil {
			// A store without the namespace index: every object, filtered.
			items = idx.List()
		}
		for _, item := range items {
			o, ok := item.(client.Object)
			if !ok || isStub(item) || o.GetNamespace() != namespace {
				continue
			}
			if regress.expandTracked {
				if e, ok := k.expandAny(o).(client.Object); ok {
					o = e
				}
			}
			out = append(out, heldEntry{name: o.GetName(), rv: o.GetResourceVersion(), obj: o})
		}
	}
	return out
}

// newList is an empty list of the kind.
func (k *kind) newList() (client.ObjectList, error) {
	gvk := k.gvk
	gvk.Kind += "List"
	o, err := k.scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	l, ok := o.(client.ObjectList)
	if !ok {
		return nil, fmt.Errorf("scoped cache: %T is not a list", o)
	}
	return l, nil
}

// seenUpTo is a resourceVersion s's store has caught up with: the list it
// synced from, and every event it has applied since (any namespace's: the
// cluster-wide space's moves with the whole cluster). An object told,
// missing from the space and no later than that is gone; a later one may
// only not have reached the space yet.
//
// Not the informer's LastSyncResourceVersion, nor the newest object the
// space holds: the reflector's version runs ahead of the store (an Add it
// has read and the store not yet applied would be told deleted), and the
// newest object held says nothing of what was deleted after it (an empty
// namespace said "0", so no deletion the old space missed was ever told).
func (s *space) seenUpTo() string {
	if !isClosed(s.synced) {
		return "0"
	}
	listed, stores := s.held.listedUpTo()
	if stores > 1 {
		// One informer per allowed namespace: an event one has applied
		// says nothing of another's store.
		return strconv.FormatUint(listed, 10)
	}
	return strconv.FormatUint(max(listed, s.applied.Load()), 10)
}

// saw records that s's store has applied obj's version: handlers are told
// an event after the store applied it.
func (s *space) saw(obj any) {
	o, ok := objectOf(obj)
	if !ok {
		return
	}
	rv, err := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
	if err != nil {
		return
	}
	for {
		cur := s.applied.Load()
		if rv <= cur || s.applied.CompareAndSwap(cur, rv) {
			return
		}
	}
}

func objectOf(obj any) (client.Object, bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, ok := obj.(client.Object)
	return o, ok
}

// keyOf is the namespace and name of an object, or of a deletion tombstone.
func keyOf(obj any) (namespace, name string) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		if o, ok := d.Obj.(client.Object); ok {
			return o.GetNamespace(), o.GetName()
		}
		if ns, n, found := strings.Cut(d.Key, "/"); found {
			return ns, n
		}
		return "", d.Key
	}
	if o, ok := obj.(client.Object); ok {
		return o.GetNamespace(), o.GetName()
	}
	return "", ""
}

// newerRV reports whether resourceVersion a is later than b: they are
// compared as numbers (KEP-5504), and unequal ones that are not numbers
// count as newer.
func newerRV(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA != nil || errB != nil {
		return a != b
	}
	return x > y
}

// atOrBeforeRV reports whether version v is no later than rv.
func atOrBeforeRV(v, rv string) bool {
	x, errA := strconv.ParseUint(v, 10, 64)
	y, errB := strconv.ParseUint(rv, 10, 64)
	if errA != nil || errB != nil {
		return true
	}
	return x <= y
}

// registration is a handler added to a fanout, with its registration on
// each space's informer (per, guarded by k.mu) and, for the namespaces in
// a switch, what it was told (told, guarded by mu).
type registration struct {
	k       *kind
	handler toolscache.ResourceEventHandler
	opts    toolscache.HandlerOptions
	per     map[*space]toolscache.ResourceEventHandlerRegistration

	mu   sync.Mutex
	told map[string]*toldIn
	// telling holds, per namespace, the lock of its deliveries
	// (tellLock); kept for the registration's life (a mutex a namespace).
	telling map[string]*sync.Mutex
	// pos is, per space, the latest resourceVersion r has been handed
	// (toldUpTo).
	pos map[*space]uint64
}

// regress re-introduces defects the handover had, for the randomized
// schedule test to show it finds each (TestSchedulesFindReintroducedDefects);
// each is false but in that test.
var regress struct {
	// readsLead answers a read from a space that synced before it was
	// handed the namespace (reads moved before events).
	readsLead bool
	// boundByHeld bounds what the new space has seen by the newest object
	// it holds ("0" for an empty namespace): a deletion the old space
	// missed was never told.
	boundByHeld bool
	// replayNotInitial tells what a handover tells anew as non-initial
	// Adds.
	replayNotInitial bool
	// untrackedFirst records nothing of what a namespace's first space
	// tells before a switch, nor at a handover what was told without a
	// record: a switch before it synced told its pods added again (a
	// PodSet of 300 once ended with 312 pods).
	untrackedFirst bool
	// expandTracked expands every object a switch looks at.
	expandTracked bool
	// laggingQueue hands a namespace over while a handler's queue on the
	// old owner still holds a version of an object its record left out
	// (toldIn.unsure): told added again, though told an older version.
	laggingQueue bool
	// acrossOwn answers a read across namespaces below the threshold
	// from each needed namespace's own space, handed the namespace or not.
	acrossOwn bool
	// unclaimedOwn answers a read of a namespace nothing tells from its
	// own space without making it the owner.
	unclaimedOwn bool
	// relistOrder ends the record of a handover once each handler has
	// been handed the latest version the new owner had applied, as if a
	// relist handed its objects on in order.
	relistOrder bool
}
