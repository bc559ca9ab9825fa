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
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
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
