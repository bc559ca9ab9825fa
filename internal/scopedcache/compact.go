package scopedcache

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Compact kinds: informers that hold a smaller type than the kind.
//
// A typed informer holds objects of the kind's Go type, and some are large
// before any of their content: a batchv1.Job is 1,320 bytes with its pod
// template zeroed, more than the 1 KiB a cached object may cost (issue 26).
// A Need with Expand lets the kind's transform (cache.ByObject) turn each
// decoded object into a compact client.Object of another type, and the
// cache turns it back into the kind's type wherever it leaves the
// informers, so no reader or handler changes:
//   - reads (Get, List) are answered from the informer's store by
//     compactReader, which expands what it returns, a fresh object each
//     time (the copy controller-runtime's cache reader makes);
//   - handlers are told expanded objects (registration.dispatch);
//   - indexes are computed on expanded objects (indexable).

// expandAny is obj, or the object of a tombstone, expanded to the kind's
// type.
func (k *kind) expandAny(obj any) any {
	if k.expand == nil || obj == nil {
		return obj
	}
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		if o, ok := d.Obj.(client.Object); ok {
			if e, ok := k.expand(o); ok {
				d.Obj = e
			}
		}
		return d
	}
	if o, ok := obj.(client.Object); ok {
		if e, ok := k.expand(o); ok {
			return e
		}
	}
	return obj
}

// indexable is extract for the kind's objects: stubs are in no index, and
// a compact object is indexed as its expansion.
func (k *kind) indexable(extract client.IndexerFunc) client.IndexerFunc {
	return skipStubs(func(o client.Object) []string {
		if k.expand != nil {
			if e, ok := k.expand(o); ok {
				o = e
			}
		}
		return extract(o)
	})
}

// indexableRaw is indexers for the kind's objects, as indexable.
func (k *kind) indexableRaw(indexers toolscache.Indexers) toolscache.Indexers {
	out := make(toolscache.Indexers, len(indexers))
	for name, f := range skipStubsRaw(indexers) {
		out[name] = func(obj any) ([]string, error) { return f(k.expandAny(obj)) }
	}
	return out
}

// held is what reads what s holds: its cache, or for a compact kind a
// compactReader of its informer.
func (k *kind) held(s *space) client.Reader {
	if k.expand == nil {
		return s.cache
	}
	return compactReader{k: k, s: s}
}

// compactReader reads a compact kind from a space's informer as
// controller-runtime's cache reader does (namespace, label selector, exact
// field selectors by index, limit), and expands what it returns. Stubs are
// never returned.
type compactReader struct {
	k *kind
	s *space
}

// heldStores are the stores of a space's informers of the kind: one, or
// one per namespace of a manager limited to some (DefaultNamespaces).
type heldStores struct {
	mu     sync.Mutex
	stores []toolscache.Indexer
	// listed is, per store, the resourceVersion of the first list its
	// informer read (the one it syncs from).
	listed []*atomic.Uint64
}

// listedUpTo is a version every store has listed up to: the least first
// list among them, 0 before each has listed.
func (h *heldStores) listedUpTo() (rv uint64, stores int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, l := range h.listed {
		if v := l.Load(); i == 0 || v < rv {
			rv = v
		}
	}
	return rv, len(h.listed)
}

func (h *heldStores) add(s toolscache.Indexer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stores = append(h.stores, s)
}

func (h *heldStores) all() []toolscache.Indexer {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.stores)
}

// capturing is the informer constructor of a space's cache (newInformer,
// client-go's when nil) that records the stores of the kind's informers in
// held: controller-runtime's cache keeps them to itself, and its reader
// cannot read a compact kind.
func (k *kind) capturing(newInformer func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer, held *heldStores) func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
	if newInformer == nil {
		newInformer = toolscache.NewSharedIndexInformer
	}
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		if reflect.TypeOf(obj) != reflect.TypeOf(k.obj) {
			return newInformer(lw, obj, resync, indexers)
		}
		listed := &atomic.Uint64{}
		inf := newInformer(firstList{lw: toolscache.ToListerWatcherWithContext(lw), rv: listed}, obj, resync, indexers)
		held.add(inf.GetIndexer())
		held.mu.Lock()
		held.listed = append(held.listed, listed)
		held.mu.Unlock()
		return inf
	}
}

func (c compactReader) Get(_ context.Context, key client.ObjectKey, out client.Object, _ ...client.GetOption) error {
	var item any
	exists := false
	for _, idx := range c.s.held.all() {
		var err error
		if item, exists, err = idx.GetByKey(key.Namespace + "/" + key.Name); err != nil {
			return err
		}
		if exists {
			break
		}
	}
	if !exists || isStub(item) {
		return apierrors.NewNotFound(schema.GroupResource{Group: c.k.gvk.Group, Resource: c.k.gvk.Kind}, key.Name)
	}
	obj, ok := c.k.expandAny(item).(client.Object)
	if !ok {
		return fmt.Errorf("scoped cache: the cache of %s held a %T", c.s.describe(), item)
	}
	src, dst := reflect.ValueOf(obj), reflect.ValueOf(out)
	if src.Type() != dst.Type() {
		return fmt.Errorf("scoped cache: the cache holds %s as %T, but %T was asked for", c.k.gvk.Kind, obj, out)
	}
	dst.Elem().Set(src.Elem())
	out.GetObjectKind().SetGroupVersionKind(c.k.gvk)
	return nil
}

func (c compactReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	var out []runtime.Object
	if err := c.each(ctx, func(obj client.Object) error {
		out = append(out, obj)
		return nil
	}, opts...); err != nil {
		return err
	}
	if err := apimeta.SetList(list, out); err != nil {
		return err
	}
	list.SetContinue("continue-not-supported")
	return nil
}

// itemsOf is what idx holds for a read with lo: by its field indexes, its
// namespace index, or all of it.
func (c compactReader) itemsOf(idx toolscache.Indexer, lo *client.ListOptions) ([]any, error) {
	switch {
	case lo.FieldSelector != nil:
		return byFields(idx, lo.FieldSelector, lo.Namespace)
	case lo.Namespace != "":
		return idx.ByIndex(toolscache.NamespaceIndex, lo.Namespace)
	}
	return idx.List(), nil
}

var _ client.Reader = compactReader{}

// byFields is what idx's field indexes (controller-runtime's, named
// "field:<field>", keyed "<namespace>/<value>" or "__all_namespaces/<value>")
// hold for every exact requirement of sel.
func byFields(idx toolscache.Indexer, sel fields.Selector, namespace string) ([]any, error) {
	reqs := sel.Requirements()
	if len(reqs) == 0 {
		return nil, fmt.Errorf("an empty field selector is not supported by the cache")
	}
	if namespace == "" {
		namespace = "__all_namespaces"
	}
	var out []any
	for i, req := range reqs {
		if req.Operator != selection.Equals && req.Operator != selection.DoubleEquals {
			return nil, fmt.Errorf("non-exact field matches are not supported by the cache")
		}
		got, err := idx.ByIndex("field:"+req.Field, namespace+"/"+req.Value)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			out = got
			continue
		}
		keep := map[any]bool{}
		for _, o := range got {
			keep[o] = true
		}
		kept := out[:0]
		for _, o := range out {
			if keep[o] {
				kept = append(kept, o)
			}
		}
		out = kept
	}
	return out, nil
}

// firstList is a ListerWatcher that records the resourceVersion of the
// first list it reads: the informer's store holds at least that once it
// has synced (a later list may not be applied yet).
type firstList struct {
	lw toolscache.ListerWatcherWithContext
	rv *atomic.Uint64
}

func (f firstList) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	out, err := f.lw.ListWithContext(ctx, options)
	if err != nil {
		return out, err
	}
	if lm, err := apimeta.ListAccessor(out); err == nil {
		if rv, err := strconv.ParseUint(lm.GetResourceVersion(), 10, 64); err == nil {
			f.rv.CompareAndSwap(0, rv)
		}
	}
	return out, nil
}

func (f firstList) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	return f.lw.WatchWithContext(ctx, options)
}

func (f firstList) List(options metav1.ListOptions) (runtime.Object, error) {
	return f.ListWithContext(context.Background(), options)
}

func (f firstList) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return f.WatchWithContext(context.Background(), options)
}
