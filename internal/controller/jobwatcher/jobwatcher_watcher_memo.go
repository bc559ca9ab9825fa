package jobwatcher

import (
	"context"
	"sync"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// watcherMemo keeps, per namespace, the compiled watchers that the handlers
// of Job events decide with (which watcher governs a listed Job and when it
// falls due, which watchers a Job event wakes), between two events of the
// watchers. The handlers listed them from the cache for every Job event,
// copying every watcher, four Lists an event: at a start over 10,000 Jobs,
// 40,000 Lists and 72 MB of the manager's 432 MB of allocations
// (TestStartProfile), on the path its workers wait for. Watchers are few and change seldom; Jobs are many.
//
// Only handlers read it: a Reconcile reads the watchers from the cache, as
// every decision that acts does. A memo is stale from the moment the cache
// holds a watcher's change until that change's event reaches changed (each
// handler registration is told in its own time); what a handler decides in
// that moment is decided again: a watcher's event brings the Jobs in its
// reach back (watcherJobs) and its status controller's own event wakes it.
type watcherMemo struct {
	// list reads the watchers of a namespace from the cache.
	list func(ctx context.Context, ns string) ([]*compiledWatcher, error)

	mu sync.Mutex
	// version counts the watcher events told, so that a list read while
	// one came in is not kept.
	version uint64
	byNS    map[string][]*compiledWatcher
}

func newWatcherMemo(list func(ctx context.Context, ns string) ([]*compiledWatcher, error)) *watcherMemo {
	return &watcherMemo{list: list, byNS: map[string][]*compiledWatcher{}}
}

// get returns the compiled watchers of namespace ns, read from the cache
// when the memo does not hold them. What it returns is shared: read only.
func (m *watcherMemo) get(ctx context.Context, ns string) ([]*compiledWatcher, error) {
	m.mu.Lock()
	if ws, ok := m.byNS[ns]; ok {
		m.mu.Unlock()
		return ws, nil
	}
	version := m.version
	m.mu.Unlock()
	ws, err := m.list(ctx, ns)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.version == version {
		m.byNS[ns] = ws
	}
	return ws, nil
}

// changed notes that a watcher changed, was made or went: nothing the memo
// holds is kept. A watcher's event is told after the cache holds the
// change, so what get reads after changed returns sees it.
func (m *watcherMemo) changed() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.version++
	clear(m.byNS)
}

// watcherEvents is a handler of watcher events that tells memo of every
// one, then passes on to next those that pass (nil: none).
type watcherEvents struct {
	memo *watcherMemo
	pass predicate.Predicate
	next handler.EventHandler
}

var _ handler.EventHandler = watcherEvents{}

type requestQueue = workqueue.TypedRateLimitingInterface[reconcile.Request]

func (h watcherEvents) Create(ctx context.Context, e event.CreateEvent, q requestQueue) {
	h.memo.changed()
	if h.next != nil && h.pass.Create(e) {
		h.next.Create(ctx, e, q)
	}
}

func (h watcherEvents) Update(ctx context.Context, e event.UpdateEvent, q requestQueue) {
	h.memo.changed()
	if h.next != nil && h.pass.Update(e) {
		h.next.Update(ctx, e, q)
	}
}

func (h watcherEvents) Delete(ctx context.Context, e event.DeleteEvent, q requestQueue) {
	h.memo.changed()
	if h.next != nil && h.pass.Delete(e) {
		h.next.Delete(ctx, e, q)
	}
}

func (h watcherEvents) Generic(ctx context.Context, e event.GenericEvent, q requestQueue) {
	h.memo.changed()
	if h.next != nil && h.pass.Generic(e) {
		h.next.Generic(ctx, e, q)
	}
}
