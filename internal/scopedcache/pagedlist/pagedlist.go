// Package pagedlist makes informers that read their lists in pages, each
// page's objects transformed as the page arrives, and never stream them.
package pagedlist

import (
	"context"
	"fmt"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// How informers read a kind's initial list (and every list after a watch
// is lost): in pages, each page's objects transformed as the page arrives.
//
// client-go v0.37 streams the initial list by default (WatchListClient): a
// watch that sends every object and then a bookmark saying the list is
// complete. The apiserver's watch cache sends that bookmark only on its
// bookmark timer, once a second with jitter (k8s.io/apiserver
// pkg/storage/cacher: bookmarkTimer, wait.Jitter(time.Second, 0.25)), so
// every informer's sync waits up to 1.25 s for it whatever it lists, and the
// scoped cache's kinds wait twice in a row: first for the kinds that say
// which namespaces are needed (JobWatchers, PodSets, …), then for the
// per-namespace informers those start. At a restart over a backlog of 100
// expired Jobs that was 1.2 s of the 1.33 s until the first deletion
// (issue 26; the restarted TTL-after-finished controller was done in 1.20 s).
//
// A plain paginated list has no such wait, but client-go's reflector
// gathers every page into one list of whole decoded objects before its
// transform runs: the peak the streaming list exists to avoid (100,000
// Jobs decoded at once). So the List of Informers' informers reads the pages
// itself and transforms each page's objects before reading the next: the
// peak is one page of whole objects; the informer's store still applies
// the transform again to what it is given, which every transform here
// leaves as it is (a compact object, a stub: see each kind's transform).

// pageSize is how many objects a page of a list holds (client-go's pager
// default). The apiserver serves pages from its watch cache
// (ListFromCacheSnapshot, on by default since 1.34).
const pageSize = 500

// NewInformerFunc is cache.Options.NewInformer.
type NewInformerFunc = func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer

// Informers is an informer constructor for opts (its NewInformer, or
// client-go's when nil) whose informers list in pages, transformed page by
// page with the transform opts gives their kind, instead of streaming.
func Informers(opts cache.Options) NewInformerFunc {
	next := opts.NewInformer
	if next == nil {
		next = toolscache.NewSharedIndexInformer
	}
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		return next(pagedLister{lw: toolscache.ToListerWatcherWithContext(lw), transform: transformOf(opts, obj)}, obj, resync, indexers)
	}
}

// transformOf is the transform opts gives obj's kind: its ByObject's, else
// the default.
func transformOf(opts cache.Options, obj runtime.Object) toolscache.TransformFunc {
	for o, b := range opts.ByObject {
		if reflect.TypeOf(o) == reflect.TypeOf(obj) && b.Transform != nil {
			return b.Transform
		}
	}
	return opts.DefaultTransform
}

// pagedLister is a ListerWatcher that lists in pages, transforming each
// page's objects, and says it cannot stream a list, so that client-go's
// reflector lists (IsWatchListSemanticsUnSupported).
type pagedLister struct {
	lw        toolscache.ListerWatcherWithContext
	transform toolscache.TransformFunc
}

// IsWatchListSemanticsUnSupported turns client-go's streaming list off
// for the informer (k8s.io/client-go/util/watchlist).
func (pagedLister) IsWatchListSemanticsUnSupported() bool { return true }

// ListWithContext reads the whole list as of now, in pages. The reflector
// asks for resourceVersion "0" (any version the apiserver has) or the last
// one it saw; the freshest list (resourceVersion "") satisfies both, and is
// the one a list can be paged through from the start.
//
// A page after the first is of the version the first page was read at; when
// the apiserver no longer has it (410 Expired: compacted while a long list
// was read), the list starts over once from a fresh first page, as
// client-go's pager falls back to a full list, but still in pages: a full
// list would decode every object at once. Expired again, the error goes to
// the reflector, which lists again after its backoff.
func (p pagedLister) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	options.ResourceVersion, options.ResourceVersionMatch = "", ""
	options.Limit, options.Continue = pageSize, ""
	out := &metav1.List{}
	restarted := false
	for {
		page, err := p.lw.ListWithContext(ctx, options)
		if apierrors.IsResourceExpired(err) && options.Continue != "" && !restarted {
			restarted, options.Continue, out = true, "", &metav1.List{}
			continue
		}
		if err != nil {
			return nil, err
		}
		lm, err := apimeta.ListAccessor(page)
		if err != nil {
			return nil, err
		}
		if options.Continue == "" {
			out.ResourceVersion = lm.GetResourceVersion()
		}
		if err := apimeta.EachListItem(page, func(o runtime.Object) error {
			if p.transform != nil {
				t, err := p.transform(o)
				if err != nil {
					return err
				}
				var ok bool
				if o, ok = t.(runtime.Object); !ok {
					return fmt.Errorf("transform of a %T returned a %T", o, t)
				}
			}
			out.Items = append(out.Items, runtime.RawExtension{Object: o})
			return nil
		}); err != nil {
			return nil, err
		}
		if options.Continue = lm.GetContinue(); options.Continue == "" {
			return out, nil
		}
	}
}

// WatchWithContext is lw's.
func (p pagedLister) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	return p.lw.WatchWithContext(ctx, options)
}

// List is ListWithContext without a context (toolscache.ListerWatcher).
func (p pagedLister) List(options metav1.ListOptions) (runtime.Object, error) {
	return p.ListWithContext(context.Background(), options)
}

// Watch is WatchWithContext without a context (toolscache.ListerWatcher).
func (p pagedLister) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return p.WatchWithContext(context.Background(), options)
}
