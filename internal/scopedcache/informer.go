package scopedcache

// The one informer a kind's handlers see (fanout), whatever spaces run.

import (
	"errors"
	"fmt"
	"slices"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

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
