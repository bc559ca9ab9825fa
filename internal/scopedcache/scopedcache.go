// Package scopedcache is a controller-runtime cache that holds some kinds
// only in the namespaces where a controller can act on them.
//
// A cluster holds many more pods and Jobs than Deckhand acts on: a PodSet or
// a PodBugger acts on the pods of its own namespace, a JobWatcher on the Jobs
// of its namespace, a ClusterJobWatcher on those of the namespaces it
// reaches. A cache of every pod and Job in the cluster costs memory in
// proportion to objects Deckhand never touches (10,000 unrelated pods added
// about 45 MiB). For such a kind this cache runs an informer per namespace
// that an enabled controller needs, or one cluster-wide informer once more
// than ClusterWideAbove namespaces are needed (which holds only stubs of
// the objects of namespaces nothing needs: stubs.go), starts and stops them
// as the objects that need them come and go, and serves reads, indexes and
// event handlers across them as one cache.
//
// Every other kind is held by an ordinary controller-runtime cache.
package scopedcache

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Need is one controller's need for a kind held per namespace.
type Need struct {
	// Object is the kind, such as &corev1.Pod{}.
	Object client.Object
	// Namespaces lists the namespaces the controller needs the kind in,
	// reading the cluster-wide cache (the objects that need them, such as
	// PodSets, are few and cached everywhere). Nil needs none: the need of
	// a disabled controller, which still keeps the kind scoped.
	Namespaces func(ctx context.Context, r client.Reader) ([]string, error)
	// Triggers are the cluster-wide kinds whose changes can change what
	// Namespaces returns.
	Triggers []client.Object
	// Expand, when set, says that the kind's transform (cache.ByObject)
	// holds its objects as a compact type (compact.go): it returns a new
	// object of the kind's type from a compact one, and false for anything
	// else. The first Need of a kind with Expand sets it.
	Expand func(held client.Object) (client.Object, bool)
}

// NamespacesOf is a Need's Namespaces for a controller that acts in the
// namespaces holding an object of list's kind (a PodSet, a PodBugger).
func NamespacesOf(list client.ObjectList) func(ctx context.Context, r client.Reader) ([]string, error) {
	return func(ctx context.Context, r client.Reader) ([]string, error) {
		l, ok := list.DeepCopyObject().(client.ObjectList)
		if !ok {
			return nil, fmt.Errorf("scoped cache: %T is not a list", list)
		}
		if err := r.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		var out []string
		err := apimeta.EachListItem(l, func(o runtime.Object) error {
			if m, err := apimeta.Accessor(o); err == nil {
				out = append(out, m.GetNamespace())
			}
			return nil
		})
		return out, err
	}
}

// ClusterWideAbove is how many namespaces a kind is held in with one
// informer each; beyond it, one cluster-wide informer holds the kind (many
// watches cost more than the objects of the few namespaces not needed).
const ClusterWideAbove = 16

// PerNamespaceAtMost is how few namespaces must be needed again before the
// cluster-wide informer gives way to one per namespace: between the two, a
// kind stays as it is, so a cluster hovering at ClusterWideAbove does not
// switch (and list everything again) at every change.
const PerNamespaceAtMost = 12

// DefaultKeepFor is how long a namespace's informer outlives the need for
// it (and the last read from it): a PodSet deleted and made again, or a read
// of a namespace nothing needs, does not start a new list each time. It also
// bounds how long a read waits for an informer nothing needs that cannot
// sync (the apiserver away), and how long a switch's deliveries are checked.
const DefaultKeepFor = time.Minute

// keepFor is the keep time of caches whose Options do not set one: the
// package's tests shorten it (SetKeepFor).
var keepFor = DefaultKeepFor

// Options tune a Cache; the zero value is what a manager runs with.
type Options struct {
	// KeepFor is how long a namespace's informer outlives the need for it
	// and the last read (DefaultKeepFor when zero). Tests shorten it to
	// drive an apiserver outage past it in seconds.
	KeepFor time.Duration
	// ClusterWideAbove and PerNamespaceAtMost move the thresholds of the
	// switch (ClusterWideAbove and PerNamespaceAtMost when zero), for
	// measuring the designs the switch chooses between (test/bench):
	// ClusterWideAbove negative holds a kind cluster-wide whatever is
	// needed (PerNamespaceAtMost is then not looked at); ClusterWideAbove
	// math.MaxInt holds it per namespace only. Otherwise PerNamespaceAtMost
	// must be below ClusterWideAbove.
	ClusterWideAbove   int
	PerNamespaceAtMost int
}

// thresholds are the switch's: above how many needed namespaces a kind
// goes cluster-wide, and at how few it comes back.
type thresholds struct{ clusterWideAbove, perNamespaceAtMost int }

func (o Options) thresholds() (thresholds, error) {
	t := thresholds{clusterWideAbove: ClusterWideAbove, perNamespaceAtMost: PerNamespaceAtMost}
	if o.ClusterWideAbove != 0 {
		t.clusterWideAbove = o.ClusterWideAbove
	}
	if o.PerNamespaceAtMost != 0 {
		t.perNamespaceAtMost = o.PerNamespaceAtMost
	}
	if t.clusterWideAbove < 0 {
		t.perNamespaceAtMost = math.MinInt
	} else if t.perNamespaceAtMost >= t.clusterWideAbove {
		return t, fmt.Errorf("scoped cache: PerNamespaceAtMost (%d) must be below ClusterWideAbove (%d)", t.perNamespaceAtMost, t.clusterWideAbove)
	}
	return t, nil
}

// Cache is a cache.Cache that holds the kinds of its needs per namespace.
//
// A read of a scoped kind in a namespace no controller needs is still
// answered, from an informer started for it (kept for keepFor after the last
// read): a reader never gets an empty answer only because the cache chose
// not to hold the namespace. A read across all namespaces answers from the
// namespaces that are needed.
type Cache struct {
	cache.Cache
	scheme *runtime.Scheme
	kinds  map[schema.GroupVersionKind]*kind
}

// New returns a cache.NewCacheFunc for a manager (cluster.Options.NewCache):
// the cache opts describe, with the kinds of needs held per namespace.
func New(needs ...Need) cache.NewCacheFunc { return Options{}.New(needs...) }

// New is the package's New with these options.
func (o Options) New(needs ...Need) cache.NewCacheFunc {
	keep := o.KeepFor
	if keep <= 0 {
		keep = keepFor
	}
	return func(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
		limits, err := o.thresholds()
		if err != nil {
			return nil, err
		}
		inner, err := cache.New(cfg, opts)
		if err != nil {
			return nil, err
		}
		c := &Cache{Cache: inner, scheme: opts.Scheme, kinds: map[schema.GroupVersionKind]*kind{}}
		for _, n := range needs {
			gvk, err := apiutil.GVKForObject(n.Object, opts.Scheme)
			if err != nil {
				return nil, fmt.Errorf("scoped cache: %w", err)
			}
			k := c.kinds[gvk]
			if k == nil {
				k = newKind(gvk, n.Object, cfg, opts, keep)
				k.limits = limits
				c.kinds[gvk] = k
			}
			if n.Namespaces != nil {
				k.needs = append(k.needs, n)
			}
			if k.expand == nil {
				k.expand = n.Expand
			}
		}
		return c, nil
	}
}

// kindOf is the scoped kind of obj (an object or a list), nil for a kind
// the inner cache holds.
func (c *Cache) kindOf(obj runtime.Object) (*kind, error) {
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		return nil, err
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	return c.kinds[gvk], nil
}

// Get reads obj from its namespace's informer.
func (c *Cache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r, err := c.readerFor(ctx, obj, key.Namespace)
	if err != nil {
		return err
	}
	return r.Get(ctx, key, obj, opts...)
}

// List reads from the namespace's informer or, without a namespace, from
// every needed namespace's.
func (c *Cache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r, err := c.readerFor(ctx, list, (&client.ListOptions{}).ApplyOptions(opts).Namespace)
	if err != nil {
		return err
	}
	return r.List(ctx, list, opts...)
}

// readerFor is what answers a read of obj's kind in namespace: the inner
// cache, or the scoped kind's informers.
func (c *Cache) readerFor(ctx context.Context, obj runtime.Object, namespace string) (client.Reader, error) {
	k, err := c.kindOf(obj)
	if err != nil || k == nil {
		return c.Cache, err
	}
	return k.reader(ctx, namespace)
}

// GetInformer returns, for a scoped kind, an informer whose handlers and
// indexers are added to every namespace's informer, now and later.
func (c *Cache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	k, err := c.kindOf(obj)
	if err != nil {
		return nil, err
	}
	if k == nil {
		return c.Cache.GetInformer(ctx, obj, opts...)
	}
	return k.informer, nil
}

// GetInformerForKind is GetInformer by GroupVersionKind.
func (c *Cache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	if k := c.kinds[gvk]; k != nil {
		return k.informer, nil
	}
	return c.Cache.GetInformerForKind(ctx, gvk, opts...)
}

// RemoveInformer is not supported for a scoped kind: its informers come and
// go with the namespaces that need them.
func (c *Cache) RemoveInformer(ctx context.Context, obj client.Object) error {
	k, err := c.kindOf(obj)
	if err != nil {
		return err
	}
	if k != nil {
		return fmt.Errorf("scoped cache: the informers of %s cannot be removed", k.gvk.Kind)
	}
	return c.Cache.RemoveInformer(ctx, obj)
}

// IndexField adds the index to every namespace's informer of a scoped kind,
// now and later.
func (c *Cache) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	k, err := c.kindOf(obj)
	if err != nil {
		return err
	}
	if k == nil {
		return c.Cache.IndexField(ctx, obj, field, extract)
	}
	return k.indexField(ctx, field, extract)
}

// Start runs the inner cache and, once it has synced, keeps each scoped
// kind's informers to the namespaces needed. It blocks until ctx is done.
func (c *Cache) Start(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- c.Cache.Start(ctx) }()
	if !InnerSynced(ctx, c.Cache) {
		if err := <-errc; err != nil {
			return err
		}
		return ctx.Err()
	}
	var wg sync.WaitGroup
	for _, k := range c.kinds {
		if err := k.watchTriggers(ctx, c.Cache); err != nil {
			return err
		}
		wg.Go(func() { k.run(ctx, c.Cache) })
	}
	err := <-errc
	wg.Wait()
	return err
}

// WaitForCacheSync waits for the inner cache and for the informers of the
// namespaces each scoped kind needed when it started.
func (c *Cache) WaitForCacheSync(ctx context.Context) bool {
	if !InnerSynced(ctx, c.Cache) {
		return false
	}
	for _, k := range c.kinds {
		select {
		case <-k.started:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// Namespaces reports where the kind of obj is held: the namespaces with an
// informer of their own, and whether a cluster-wide informer holds it.
func (c *Cache) Namespaces(obj client.Object) (namespaces []string, clusterWide bool) {
	k, err := c.kindOf(obj)
	if err != nil || k == nil {
		return nil, false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for ns := range k.spaces {
		if ns == allNamespaces {
			clusterWide = true
			continue
		}
		namespaces = append(namespaces, ns)
	}
	slices.Sort(namespaces)
	return namespaces, clusterWide
}

// allNamespaces is the key of the cluster-wide space.
const allNamespaces = ""

// kind is one scoped kind: its spaces (an informer for a namespace, or for
// all of them), and the handlers and indexers every space gets.
type kind struct {
	gvk      schema.GroupVersionKind
	obj      client.Object
	scheme   *runtime.Scheme
	needs    []Need
	newCache func(namespace string, held *heldStores) (cache.Cache, error)
	// allowed are the namespaces the manager may watch (its
	// DefaultNamespaces); nil is any.
	allowed  sets.Set[string]
	informer *fanout
	// keepFor is how long an unneeded space lives (Options.KeepFor).
	keepFor time.Duration
	// limits are the switch's thresholds (Options.ClusterWideAbove).
	limits thresholds
	// expand turns a compact object back into the kind's (Need.Expand).
	expand func(client.Object) (client.Object, bool)

	// poke asks run to look at the needs again; started is closed once the
	// namespaces needed at start have synced.
	poke    chan struct{}
	started chan struct{}
	// postponed holds the namespaces whose handover waits for a handler's
	// queue (handOver), since when; run's own.
	postponed map[string]time.Time

	mu       sync.Mutex
	ctx      context.Context // the cache's, once it runs
	spaces   map[string]*space
	handlers []*registration
	// clusterWide is whether the kind is held by one informer for all
	// namespaces (or switching to it).
	clusterWide bool
	// neededNow is the namespaces needed at the last look at the needs,
	// for the cluster-wide informer's transform (stubs.go); stubbed are
	// the namespaces it holds stubs of, under stubMu.
	neededNow atomic.Pointer[sets.Set[string]]
	stubMu    sync.Mutex
	stubbed   sets.Set[string]
	// tracking holds the namespaces whose deliveries are checked against
	// what each handler was told (handover.go): from a switch's start to
	// keepFor after its end, and from the start of a space that tells its
	// namespace first (first names those) until every handler has been
	// told what it listed (zero until then).
	tracking map[string]time.Time
	first    sets.Set[string]
	indexers []indexer
	// rawIndexers are indexers added to the informer itself.
	rawIndexers []toolscache.Indexers

	// owners says which space's events reach handlers (handover.go);
	// ownMu serializes its writers. deliverMu is held for reading by every
	// delivery and for writing by a handover. It is never taken with mu
	// held: a handler may read the cache.
	owners    atomic.Pointer[owners]
	ownMu     sync.Mutex
	deliverMu sync.RWMutex
	// claimMu is held for writing by a claim (claimLocked), around its
	// record and its change of owner, and for reading by a delivery from
	// being handed an event to its check against the owner and the
	// record. Taken after mu, never before it.
	claimMu sync.RWMutex

	// onRead, when set (by tests), is told which space answers each read
	// of a namespace, and the owners of that moment. k.mu is held.
	onRead func(namespace string, answers *space, o *owners)
	// onUntold, when set (by tests), is told of each space stopped, after
	// its namespaces lost it as their owner. k.mu is held.
	onUntold func(namespace string)
	// onHanded, when set (by tests), is told of each event a delivery has
	// been handed, before its check against the owner.
	onHanded func(s *space, namespace, name string)
	// onTelling, when set (by tests), is told of each event a delivery
	// is about to tell a handler.
	onTelling func(s *space, namespace, name string)
}

type indexer struct {
	field   string
	extract client.IndexerFunc
}

// space is the informer of one namespace (or of all).
type space struct {
	namespace string
	cache     cache.Cache
	informer  cache.Informer
	// held are the stores of the space's informers of the kind, read
	// directly for a compact kind (compact.go).
	held   *heldStores
	stop   context.CancelFunc
	synced chan struct{}
	// dropped is closed when the space stops: a reader waiting for it to
	// sync gets an error instead of waiting for good.
	dropped   chan struct{}
	startedAt time.Time
	// needed is whether the last look at the needs wanted it; unneededSince
	// and lastRead decide when an unneeded space stops.
	needed        bool
	unneededSince time.Time
	lastRead      time.Time
	// claimed is whether the space tells its namespace from its start in
	// place of a cluster-wide space holding stubs of it, and is still to
	// be handed it (joinLocked).
	claimed bool
	// applied is the latest resourceVersion of an event the space's
	// handlers were told, so one its store has applied (seenUpTo).
	applied atomic.Uint64
}

func newKind(gvk schema.GroupVersionKind, obj client.Object, cfg *rest.Config, opts cache.Options, keep time.Duration) *kind {
	k := &kind{gvk: gvk, obj: obj, scheme: opts.Scheme, keepFor: keep, limits: thresholds{ClusterWideAbove, PerNamespaceAtMost}, spaces: map[string]*space{},
		tracking: map[string]time.Time{}, first: sets.New[string](), poke: make(chan struct{}, 1), started: make(chan struct{}), stubbed: sets.New[string]()}
	k.owners.Store(&owners{})
	if len(opts.DefaultNamespaces) > 0 {
		if _, all := opts.DefaultNamespaces[cache.AllNamespaces]; !all {
			k.allowed = sets.KeySet(opts.DefaultNamespaces)
		}
	}
	k.informer = &fanout{k: k}
	k.newCache = func(namespace string, held *heldStores) (cache.Cache, error) {
		o := opts
		if namespace != allNamespaces {
			o.DefaultNamespaces = map[string]cache.Config{namespace: {}}
		} else {
			var err error
			if o, err = k.clusterWideOptions(opts); err != nil {
				return nil, err
			}
		}
		// Set last: clusterWideOptions starts again from opts.
		o.NewInformer = k.capturing(opts.NewInformer, held)
		return cache.New(cfg, o)
	}
	return k
}

// watchTriggers pokes run on every change of a trigger kind.
func (k *kind) watchTriggers(ctx context.Context, inner cache.Cache) error {
	poke := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { k.pokeRun() },
		UpdateFunc: func(any, any) { k.pokeRun() },
		DeleteFunc: func(any) { k.pokeRun() },
	}
	seen := sets.New[schema.GroupVersionKind]()
	for _, n := range k.needs {
		for _, t := range n.Triggers {
			gvk, err := apiutil.GVKForObject(t, k.scheme)
			if err != nil || seen.Has(gvk) {
				continue
			}
			seen.Insert(gvk)
			inf, err := inner.GetInformer(ctx, t)
			if err != nil {
				return fmt.Errorf("scoped cache of %s: watching %s: %w", k.gvk.Kind, gvk.Kind, err)
			}
			if _, err := inf.AddEventHandler(poke); err != nil {
				return fmt.Errorf("scoped cache of %s: watching %s: %w", k.gvk.Kind, gvk.Kind, err)
			}
		}
	}
	return nil
}

func (k *kind) pokeRun() {
	select {
	case k.poke <- struct{}{}:
	default:
	}
}

// run keeps the spaces to the needed namespaces until ctx is done.
func (k *kind) run(ctx context.Context, inner client.Reader) {
	log := logf.FromContext(ctx).WithValues("kind", k.gvk.Kind)
	k.mu.Lock()
	k.ctx = ctx
	k.mu.Unlock()
	first := true
	for {
		if err := k.resync(ctx, inner, time.Now()); err != nil {
			log.Error(err, "scoped cache: finding the namespaces needed; retrying")
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		if first {
			k.waitSynced(ctx)
			close(k.started)
			first = false
		}
		select {
		case <-ctx.Done():
			k.stopAll()
			return
		case <-k.poke:
		case <-time.After(k.keepFor / 2):
		}
	}
}

// resync starts the informers of newly needed namespaces, hands
// namespaces over to the informers that synced, and stops those no longer
// needed: a namespace's own informer keepFor after the need and the last
// read, the cluster-wide one once every namespace needed has its own, and a
// namespace's own once the cluster-wide one has taken it over.
func (k *kind) resync(ctx context.Context, inner client.Reader, now time.Time) error {
	needed := sets.New[string]()
	for _, n := range k.needs {
		namespaces, err := n.Namespaces(ctx, inner)
		if err != nil {
			return err
		}
		needed.Insert(namespaces...)
	}
	if k.allowed != nil {
		needed = needed.Intersection(k.allowed)
	}
	moves, err := k.plan(needed, now)
	if err != nil {
		return err
	}
	for ns := range k.postponed {
		if !slices.ContainsFunc(moves, func(m move) bool { return m.namespace == ns }) {
			delete(k.postponed, ns) // no longer due
		}
	}
	done := moves[:0]
	for _, m := range moves {
		// A handler's queue on the old owner still holding a version of
		// an object its record left out puts the handover off until the
		// handler is handed it, awaitKeepFors keepFors at most (a handler
		// that never returns would keep the namespace from switching).
		since, waited := k.postponed[m.namespace]
		if k.handOver(m.namespace, m.to, waited && now.Sub(since) >= awaitKeepFors*k.keepFor) {
			done = append(done, m)
			delete(k.postponed, m.namespace)
			continue
		}
		if !waited {
			if k.postponed == nil {
				k.postponed = map[string]time.Time{}
			}
			k.postponed[m.namespace] = now
		}
		time.AfterFunc(5*time.Millisecond, k.pokeRun)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, m := range done {
		k.tracking[m.namespace] = now.Add(k.keepFor)
		k.first.Delete(m.namespace)
		m.to.claimed = false
	}
	k.dropDoneLocked(now)
	return nil
}

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

// reader is what answers a read in namespace ("": all namespaces).
func (k *kind) reader(ctx context.Context, namespace string) (client.Reader, error) {
	if k.allowed != nil && namespace != "" && !k.allowed.Has(namespace) {
		return nil, fmt.Errorf("scoped cache: namespace %q is not watched by this manager", namespace)
	}
	k.mu.Lock()
	now := time.Now()
	all, s := k.spaces[allNamespaces], k.spaces[namespace]
	var err error
	// The space whose events reach handlers answers, so that reads and
	// deliveries of a namespace move at the same instant, the handover's:
	// a space that synced before it is handed the namespace (the
	// cluster-wide one as the 17th namespace arrives, a namespace's own on
	// the way back) may lag or lead what handlers were told.
	switch owner := k.ownerOf(namespace); {
	case namespace == "":
		r := k.acrossLocked(now)
		k.mu.Unlock()
		return r, nil
	case owner == nil || owner == all && k.isStubbed(namespace):
		// Nothing tells it, or the cluster-wide space holds stubs of it
		// (and tells only what changed since it was needed): an informer
		// of its own answers, and is handed it once it synced.
		switch {
		case s == nil:
			s, err = k.readSpaceLocked(namespace, now)
		case owner == all || !regress.unclaimedOwn:
			// Its own started before the cluster-wide space stubbed it,
			// or nothing tells it: its own answers only as the
			// namespace's owner.
			k.claimLocked(s)
		}
	case regress.readsLead:
		s = k.leadingLocked(namespace, owner)
	default:
		s = owner
	}
	if err != nil {
		k.mu.Unlock()
		return nil, err
	}
	if k.onRead != nil {
		k.onRead(namespace, s, k.owners.Load())
	}
	s.lastRead = now
	k.mu.Unlock()
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return k.held(s), nil
}

// leadingLocked is the space that answered a read of namespace when reads
// moved to a space as soon as it synced, before its events did: the defect
// the schedules' self-test puts back (regress.readsLead). k.mu is held.
func (k *kind) leadingLocked(namespace string, owner *space) *space {
	all, s := k.spaces[allNamespaces], k.spaces[namespace]
	if k.clusterWide && all != nil && !k.isStubbed(namespace) && (s == nil || isClosed(all.synced)) {
		s = all
	}
	if s == nil {
		s = owner
	}
	return s
}

// acrossLocked answers a read across namespaces: the needed namespaces'
// spaces, or, cluster-wide, that space without its stubs and the needed
// namespaces it stubbed from their own spaces. k.mu is held.
func (k *kind) acrossLocked(now time.Time) client.Reader {
	all := k.spaces[allNamespaces]
	if k.clusterWide && all != nil {
		var own []*space
		for ns, o := range k.spaces {
			if ns != allNamespaces && o.needed && k.isStubbed(ns) {
				if k.ownerOf(ns) == all {
					k.claimLocked(o) // as a read of the namespace alone does
				}
				o.lastRead = now
				own = append(own, o)
			}
		}
		all.lastRead = now
		return withoutStubs{k: k, all: all, spaces: own}
	}
	// Each needed namespace is answered by its owner, as a read of it
	// alone is: the cluster-wide space, back below the threshold, still
	// tells a namespace until its own space has synced and been handed it.
	u := union{k: k}
	for ns, s := range k.spaces {
		if !s.needed {
			continue
		}
		s.lastRead = now
		switch owner := k.ownerOf(ns); {
		case owner == s || ns == allNamespaces || regress.acrossOwn:
			u.spaces, u.in = append(u.spaces, s), append(u.in, "")
		case owner == nil || owner == all && k.isStubbed(ns):
			k.claimLocked(s) // as a read of the namespace alone does
			u.spaces, u.in = append(u.spaces, s), append(u.in, "")
		default:
			owner.lastRead = now
			u.spaces, u.in = append(u.spaces, owner), append(u.in, ns)
		}
	}
	return u
}

// readSpaceLocked starts the informer of a namespace nothing needs, for a
// read; it stops keepFor after the last. k.mu is held.
func (k *kind) readSpaceLocked(namespace string, now time.Time) (*space, error) {
	s, err := k.startLocked(namespace)
	if err != nil {
		return nil, err
	}
	s.needed, s.unneededSince = false, now
	return s, nil
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

// indexField records the index for later spaces and adds it to the
// current ones.
func (k *kind) indexField(ctx context.Context, field string, extract client.IndexerFunc) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.indexers = append(k.indexers, indexer{field: field, extract: extract})
	for _, s := range k.spaces {
		if err := s.cache.IndexField(ctx, k.obj, field, k.indexable(extract)); err != nil {
			return err
		}
	}
	return nil
}

// union lists across the spaces of the needed namespaces.
type union struct {
	k      *kind
	spaces []*space
	// in is, for each of spaces, the one namespace it is read in ("" or
	// none: all it holds): a space read for a namespace it still tells.
	in []string
}

// optsFor is opts for the i-th of u's spaces.
func (u union) optsFor(i int, opts []client.ListOption) []client.ListOption {
	if i >= len(u.in) || u.in[i] == "" {
		return opts
	}
	return append(withoutStubLabel(opts), client.InNamespace(u.in[i]))
}

func (u union) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return fmt.Errorf("scoped cache: a %s is read in its namespace", u.k.gvk.Kind)
}

func (u union) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	var items []runtime.Object
	for i, s := range u.spaces {
		if err := s.wait(ctx); err != nil {
			return err
		}
		part, ok := list.DeepCopyObject().(client.ObjectList)
		if !ok {
			return fmt.Errorf("scoped cache: %T is not a list", list)
		}
		if err := u.k.held(s).List(ctx, part, u.optsFor(i, opts)...); err != nil {
			return err
		}
		objs, err := apimeta.ExtractList(part)
		if err != nil {
			return err
		}
		items = append(items, objs...)
	}
	return apimeta.SetList(list, items)
}

// fanout is the Informer of a scoped kind: what is added to it is added to
// the informer of every space, now and later.
type fanout struct{ k *kind }

var _ cache.Informer = &fanout{}

func (f *fanout) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return f.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{})
}

func (f *fanout) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, period time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return f.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{ResyncPeriod: &period})
}

func (f *fanout) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, opts toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	k := f.k
	k.mu.Lock()
	defer k.mu.Unlock()
	r := &registration{k: k, handler: h, opts: opts, per: map[*space]toolscache.ResourceEventHandlerRegistration{}}
	for ns := range k.tracking {
		r.track(ns, k.ownerOf(ns), nil, nil)
	}
	for _, s := range k.spaces {
		if err := r.add(s); err != nil {
			return nil, err
		}
	}
	k.handlers = append(k.handlers, r)
	return r, nil
}

func (f *fanout) RemoveEventHandler(h toolscache.ResourceEventHandlerRegistration) error {
	r, ok := h.(*registration)
	if !ok || r.k != f.k {
		return errors.New("scoped cache: not a registration of this informer")
	}
	k := f.k
	k.mu.Lock()
	defer k.mu.Unlock()
	k.handlers = slices.DeleteFunc(k.handlers, func(x *registration) bool { return x == r })
	errs := make([]error, 0, len(r.per))
	for s, reg := range r.per {
		errs = append(errs, s.informer.RemoveEventHandler(reg))
	}
	clear(r.per)
	return errors.Join(errs...)
}

func (f *fanout) AddIndexers(indexers toolscache.Indexers) error {
	k := f.k
	k.mu.Lock()
	defer k.mu.Unlock()
	k.rawIndexers = append(k.rawIndexers, indexers)
	errs := make([]error, 0, len(k.spaces))
	for _, s := range k.spaces {
		errs = append(errs, s.informer.AddIndexers(k.indexableRaw(indexers)))
	}
	return errors.Join(errs...)
}

// HasSynced reports whether the namespaces needed at start, and every space
// now, have synced.
func (f *fanout) HasSynced() bool {
	k := f.k
	if !isClosed(k.started) {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range k.spaces {
		if !s.informer.HasSynced() {
			return false
		}
	}
	return true
}

func (f *fanout) HasSyncedChecker() toolscache.DoneChecker { return f }

// Name and Done make the informer its own DoneChecker: done once the
// namespaces needed at start have synced.
func (f *fanout) Name() string { return "scoped informer of " + f.k.gvk.Kind }

func (f *fanout) Done() <-chan struct{} { return f.k.started }

func (f *fanout) IsStopped() bool {
	k := f.k
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ctx != nil && k.ctx.Err() != nil
}

func (r *registration) add(s *space) error {
	reg, err := s.informer.AddEventHandlerWithOptions(delivery{r: r, s: s}, r.opts)
	if err != nil {
		return fmt.Errorf("scoped cache of %s in %q: adding a handler: %w", r.k.gvk.Kind, s.namespace, err)
	}
	r.per[s] = reg
	return nil
}

// HasSynced reports whether the handler has seen the initial objects of
// every space.
func (r *registration) HasSynced() bool {
	if !isClosed(r.k.started) {
		return false
	}
	r.k.mu.Lock()
	defer r.k.mu.Unlock()
	for _, reg := range r.per {
		if !reg.HasSynced() {
			return false
		}
	}
	return true
}

func (r *registration) HasSyncedChecker() toolscache.DoneChecker { return r.k.informer }

func ptrTo[T any](v T) *T { return &v }
