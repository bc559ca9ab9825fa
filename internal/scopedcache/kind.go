package scopedcache

// The scoped kinds: a kind's spaces (an informer for a namespace or for
// all), and the loop that starts and stops them as controllers' needs change.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

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
