package manager

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
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
type eachKindSynced struct {
	*scopedcache.Cache
	scheme *runtime.Scheme
	// synced is closed, for each kind held per namespace, once the
	// namespaces needed at the start have synced.
	synced map[schema.GroupVersionKind]<-chan struct{}
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

// WaitForCacheSync waits for the cluster-wide informers the cache started
// with: what controller-runtime waits for before it starts controllers.
func (c *eachKindSynced) WaitForCacheSync(ctx context.Context) bool {
	return c.Cache.Cache.WaitForCacheSync(ctx)
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
