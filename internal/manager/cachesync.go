package manager

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/deckhand-dev/deckhand/internal/scopedcache"
)

// eachKindSynced is the manager's cache as controller-runtime's manager sees
// it: a controller starts once the kinds it reads have synced, not once
// every kind of the cache has.
//
// controller-runtime starts no controller before its cache's
// WaitForCacheSync returns, and the scoped cache's waits for every kind it
// holds per namespace: the JobWatcher, with a backlog of due Jobs, waited
// for the pods of every PodSet and PodBugger namespace it never reads. Here
// the manager waits only for the cluster-wide informers that exist when the
// cache starts (the cache started, as controller-runtime needs before any
// read); then each controller waits for the informers of its own sources
// (controller-runtime's source sync, as for a controller added to a running
// manager), and a read of a kind held per namespace waits for that kind's
// namespaces needed at the start (scopedcache's per-kind sync), as a read of
// any other kind waits for its informer (controller-runtime's). So no reader
// sees a kind before it has synced, as before; only the unrelated kinds are
// no longer waited for. /readyz still waits for every kind (allSynced).
//
// And a source waits for its own handler, not for client-go's poll of it.
// controller-runtime's source (a Kind) starts by getting its informer and
// adding its handler, then waits for the cache (WaitForCacheSync) and then
// for its handler to have been told the initial list, polling the handler
// every 100 ms (client-go's WaitForCacheSync); the cache's own wait polls
// at that pace too. So a controller's workers started on a 100 ms tick
// after its handlers were done, two ticks after its informers had synced
// at a restart (issue 26: 0.2 s of the 0.63 s a restart took to delete a
// backlog of 100 Jobs). The informers this cache hands out record the
// handlers added to them under the context they were asked for with, which
// is the one the source later waits with; WaitForCacheSync(ctx) waits for
// the handlers recorded under ctx, checking every few milliseconds, and a
// handler that has been told the initial list has its informer synced. A
// wait with no handler recorded (the manager's own, or a source that asked
// with another context) waits for the cluster-wide informers as before.
type eachKindSynced struct {
	*scopedcache.Cache
	scheme *runtime.Scheme
	// synced is closed, for each kind held per namespace, once the
	// namespaces needed at the start have synced.
	synced map[schema.GroupVersionKind]<-chan struct{}
	// handlers are the handlers added to the informers handed out, by the
	// context the informer was asked for with, until a wait with that
	// context takes them or it is done.
	handlers sourceHandlers
}

// handlerSyncPoll is how often a source's wait checks its handlers.
const handlerSyncPoll = 5 * time.Millisecond

// sourceHandlers records handler registrations by context.
type sourceHandlers struct {
	mu sync.Mutex
	by map[context.Context][]toolscache.ResourceEventHandlerRegistration
}

func (s *sourceHandlers) add(ctx context.Context, reg toolscache.ResourceEventHandlerRegistration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[context.Context][]toolscache.ResourceEventHandlerRegistration{}
	}
	if _, known := s.by[ctx]; !known {
		context.AfterFunc(ctx, func() { s.take(ctx) })
	}
	s.by[ctx] = append(s.by[ctx], reg)
}

// take is what was recorded under ctx, forgotten.
func (s *sourceHandlers) take(ctx context.Context) []toolscache.ResourceEventHandlerRegistration {
	s.mu.Lock()
	defer s.mu.Unlock()
	regs := s.by[ctx]
	delete(s.by, ctx)
	return regs
}

// recordingInformer is an informer of the cache whose handlers are recorded
// under the context it was asked for with.
type recordingInformer struct {
	cache.Informer
	ctx      context.Context
	handlers *sourceHandlers
}

func (i recordingInformer) record(reg toolscache.ResourceEventHandlerRegistration, err error) (toolscache.ResourceEventHandlerRegistration, error) {
	if err == nil && reg != nil {
		i.handlers.add(i.ctx, reg)
	}
	return reg, err
}

func (i recordingInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.record(i.Informer.AddEventHandler(h))
}

func (i recordingInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.record(i.Informer.AddEventHandlerWithResyncPeriod(h, resync))
}

func (i recordingInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, opts toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.record(i.Informer.AddEventHandlerWithOptions(h, opts))
}

// GetInformer is the cache's informer of obj's kind, recording its handlers.
func (c *eachKindSynced) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	inf, err := c.Cache.GetInformer(ctx, obj, opts...)
	if err != nil {
		return nil, err
	}
	return recordingInformer{Informer: inf, ctx: ctx, handlers: &c.handlers}, nil
}

// GetInformerForKind is GetInformer by kind.
func (c *eachKindSynced) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	inf, err := c.Cache.GetInformerForKind(ctx, gvk, opts...)
	if err != nil {
		return nil, err
	}
	return recordingInformer{Informer: inf, ctx: ctx, handlers: &c.handlers}, nil
}

// perKindSync wraps the scoped cache newCache makes in eachKindSynced.
func perKindSync(newCache cache.NewCacheFunc, needs []scopedcache.Need) cache.NewCacheFunc {
	return func(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
		c, err := newCache(cfg, opts)
		if err != nil {
			return nil, err
		}
		sc, ok := c.(*scopedcache.Cache)
		if !ok {
			return c, nil
		}
		out := &eachKindSynced{Cache: sc, scheme: opts.Scheme, synced: map[schema.GroupVersionKind]<-chan struct{}{}}
		for _, n := range needs {
			gvk, err := apiutil.GVKForObject(n.Object, opts.Scheme)
			if err != nil {
				return nil, fmt.Errorf("the cache of %T: %w", n.Object, err)
			}
			inf, err := sc.GetInformer(context.Background(), n.Object)
			if err != nil {
				return nil, fmt.Errorf("the cache of %s: %w", gvk.Kind, err)
			}
			out.synced[gvk] = inf.HasSyncedChecker().Done()
		}
		return out, nil
	}
}

// WaitForCacheSync waits, for a source, until the handlers it added have
// been told the initial list; otherwise for the cluster-wide informers the
// cache started with: what controller-runtime waits for before it starts
// controllers.
func (c *eachKindSynced) WaitForCacheSync(ctx context.Context) bool {
	regs := c.handlers.take(ctx)
	if len(regs) == 0 {
		return scopedcache.InnerSynced(ctx, c.Cache.Cache)
	}
	err := wait.PollUntilContextCancel(ctx, handlerSyncPoll, true, func(context.Context) (bool, error) {
		for _, r := range regs {
			if !r.HasSynced() {
				return false, nil
			}
		}
		return true, nil
	})
	return err == nil
}

// allSynced waits for every kind, those held per namespace included.
func (c *eachKindSynced) allSynced(ctx context.Context) bool {
	return c.Cache.WaitForCacheSync(ctx)
}

// Get reads obj once its kind has synced.
func (c *eachKindSynced) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.waitFor(ctx, obj); err != nil {
		return err
	}
	return c.Cache.Get(ctx, key, obj, opts...)
}

// List reads list once its kind has synced.
func (c *eachKindSynced) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.waitFor(ctx, list); err != nil {
		return err
	}
	return c.Cache.List(ctx, list, opts...)
}

// Each hands out list's objects one at a time (scopedcache.Each) once its
// kind has synced.
func (c *eachKindSynced) Each(ctx context.Context, list client.ObjectList, fn func(client.Object) error, opts ...client.ListOption) error {
	if err := c.waitFor(ctx, list); err != nil {
		return err
	}
	return c.Cache.Each(ctx, list, fn, opts...)
}

var _ scopedcache.Eacher = &eachKindSynced{}

// waitFor waits, for a kind held per namespace, until the namespaces
// needed at the start have synced.
func (c *eachKindSynced) waitFor(ctx context.Context, obj runtime.Object) error {
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		return nil // the read itself says why
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	done, ok := c.synced[gvk]
	if !ok {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the cache of %s to sync: %w", gvk.Kind, ctx.Err())
	}
}

// sourceSyncTimeout is how long a controller waits for the informers of its
// sources before it fails (and the manager with it). controller-runtime's
// default, 2 minutes, was never reached while the manager waited for the
// whole cache before any controller (without a limit); now a controller's
// own kinds' initial lists count in it, and listing 100,000 Jobs on a
// loaded apiserver may take longer.
const sourceSyncTimeout = 30 * time.Minute
