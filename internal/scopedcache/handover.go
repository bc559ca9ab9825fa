package scopedcache

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// One source per namespace.
//
// A namespace's events reach a handler from one space only: its owner.
// While a namespace moves from one space to another (crossing the
// cluster-wide threshold, either way, or a read starting a namespace's
// informer while the cluster-wide one winds down) both informers run, but
// the new one's events (its initial list replayed as Adds among them) are
// dropped until it has synced. Then, with every delivery stopped, each
// handler is told the difference between what it was told and what the new
// informer holds, and the new space becomes the owner. Until keepFor after
// that, each handler's deliveries in the namespace are checked against what
// it was told (by resourceVersion, comparable since Kubernetes 1.35), so that
// an event still queued in either informer is not told twice or out of
// order.

// owners maps each namespace to the space whose events reach handlers.
// It is replaced, never changed, and read without a lock.
type owners struct {
	byNS map[string]*space
	// all owns the namespaces byNS does not name.
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
// namespace to the cluster-wide space.
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
// (or the cluster-wide space) from now on.
func (k *kind) disown(s *space) {
	o := k.owners.Load()
	if s.namespace == allNamespaces {
		if o.all == s {
			k.setOwner(allNamespaces, nil)
		}
		return
	}
	if o.byNS[s.namespace] == s {
		k.setOwner(s.namespace, nil)
	}
}

// told is what a handler was last told about one object of a tracked
// namespace; gone marks an object told deleted.
type told struct {
	obj  client.Object
	gone bool
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
	if isStub(obj) {
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
	if k.ownerOf(ns) != s {
		return
	}
	r.mu.Lock()
	_, tracked := r.told[ns]
	r.mu.Unlock()
	if initial && !tracked {
		// The first the handler hears of ns from its owner: recorded from
		// here on, so that a switch starting before the owner has synced
		// (or told all it holds) knows what was told.
		k.trackFirst(r, ns)
	}
	r.mu.Lock()
	ev, old, obj, ok := r.checkLocked(ns, name, ev, old, obj)
	r.mu.Unlock()
	if ok {
		r.dispatch(ev, old, obj, initial)
	}
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

// checkLocked decides whether an event about ns/name reaches the handler,
// and as what, from what the handler was told, in a tracked namespace. r.mu
// is held.
func (r *registration) checkLocked(ns, name string, ev event, old, obj any) (event, any, any, bool) {
	seen, tracked := r.told[ns]
	if !tracked {
		return ev, old, obj, true
	}
	o, _ := objectOf(obj)
	t, known := seen[name]
	if ev == deleted {
		if known && t.gone {
			return ev, old, obj, false // told already
		}
		seen[name] = told{obj: orElse(o, t.obj), gone: true}
		return ev, old, obj, true
	}
	if o == nil {
		return ev, old, obj, true
	}
	switch {
	case !known:
		seen[name] = told{obj: o}
		return added, nil, obj, true
	case !newer(o, t.obj):
		return ev, old, obj, false // told already, or older than what was told
	case t.gone:
		seen[name] = told{obj: o}
		return added, nil, obj, true
	default:
		seen[name] = told{obj: o}
		return updated, t.obj, obj, true
	}
}

// track starts checking the deliveries of namespace against what was told,
// told being what from holds now.
func (r *registration) track(namespace string, from []client.Object) {
	seen := make(map[string]told, len(from))
	for _, o := range from {
		seen[o.GetName()] = told{obj: o}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.told == nil {
		r.told = map[string]map[string]told{}
	}
	if _, ok := r.told[namespace]; !ok {
		r.told[namespace] = seen
	}
}

// trackFirst starts checking r's deliveries of namespace, as told nothing
// yet, until a switch ends or the owner has synced (endTrackingLocked).
func (k *kind) trackFirst(r *registration, namespace string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	r.track(namespace, nil)
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
// past it (else to lags and will tell it).
func (k *kind) handOver(namespace string, to *space, regs []*registration) {
	k.deliverMu.Lock()
	defer k.deliverMu.Unlock()
	objs := k.objectsIn(to, namespace)
	lastRV := seenUpTo(objs)
	for _, r := range regs {
		var out []func()
		r.mu.Lock()
		if _, ok := r.told[namespace]; !ok {
			// A handler added mid-switch: told only what deliveries since.
			r.told[namespace] = map[string]told{}
		}
		present := make(map[string]bool, len(objs))
		for _, o := range objs {
			present[o.GetName()] = true
			if ev, old, obj, ok := r.checkLocked(namespace, o.GetName(), added, nil, o); ok {
				out = append(out, func() { r.dispatch(ev, old, obj, false) })
			}
		}
		for name, t := range r.told[namespace] {
			if t.gone || present[name] || !atOrBefore(t.obj, lastRV) {
				continue
			}
			obj := t.obj
			r.told[namespace][name] = told{obj: obj, gone: true}
			out = append(out, func() { r.dispatch(deleted, nil, obj, false) })
		}
		r.mu.Unlock()
		for _, f := range out {
			f()
		}
	}
	k.setOwner(namespace, to)
}

// objectsIn is what s holds in namespace, nothing if it has not synced.
func (k *kind) objectsIn(s *space, namespace string) []client.Object {
	if !isClosed(s.synced) {
		return nil
	}
	list, err := k.newList()
	if err != nil {
		return nil
	}
	// Stubs were never told (stubs.go).
	opts := withoutStubLabel([]client.ListOption{client.InNamespace(namespace), client.UnsafeDisableDeepCopy})
	if err := k.held(s).List(context.Background(), list, opts...); err != nil {
		return nil
	}
	var out []client.Object
	_ = apimeta.EachListItem(list, func(o runtime.Object) error {
		if co, ok := o.(client.Object); ok {
			out = append(out, co)
		}
		return nil
	})
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

// seenUpTo is a resourceVersion the space has seen past: the latest among
// objs (what it holds). An object told, missing from the space and no later
// than that is gone; a later one may only not have reached the space yet.
func seenUpTo(objs []client.Object) string {
	var latest client.Object
	for _, o := range objs {
		if latest == nil || newer(o, latest) {
			latest = o
		}
	}
	if latest == nil {
		return "0"
	}
	return latest.GetResourceVersion()
}

func objectOf(obj any) (client.Object, bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, ok := obj.(client.Object)
	return o, ok
}

func orElse(a, b client.Object) client.Object {
	if a != nil {
		return a
	}
	return b
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

// newer reports whether a is a later version than b: resourceVersions are
// compared as numbers (KEP-5504), and unequal ones that are not numbers
// count as newer.
func newer(a, b client.Object) bool {
	if b == nil {
		return true
	}
	x, errA := strconv.ParseUint(a.GetResourceVersion(), 10, 64)
	y, errB := strconv.ParseUint(b.GetResourceVersion(), 10, 64)
	if errA != nil || errB != nil {
		return a.GetResourceVersion() != b.GetResourceVersion()
	}
	return x > y
}

// atOrBefore reports whether o's version is no later than rv.
func atOrBefore(o client.Object, rv string) bool {
	x, errA := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
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
	told map[string]map[string]told
}
