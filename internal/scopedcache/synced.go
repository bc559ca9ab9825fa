package scopedcache

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// syncedPoll is how often InnerSynced checks.
const syncedPoll = 5 * time.Millisecond

// InnerSynced waits until every informer of the inner cache has synced, as
// its WaitForCacheSync does, but checks every few milliseconds where that
// checks every 100 ms (client-go's WaitForCacheSync): every start waited for
// a tick of it after its informers had synced, twice in a row for the
// kinds held per namespace (the manager's wait for the cache, then this
// cache's before it reads the objects that say which namespaces are
// needed), on the path of a restart's first deletion (issue 26). Each check
// asks WaitForCacheSync with a context already done, which answers at once
// (its first check comes before it looks at the context); one that has not
// seen the cache start yet may say no, and the next check asks again.
func InnerSynced(ctx context.Context, inner cache.Cache) bool {
	return wait.PollUntilContextCancel(ctx, syncedPoll, true, func(ctx context.Context) (bool, error) {
		now, cancel := context.WithCancel(ctx)
		cancel()
		return inner.WaitForCacheSync(now), nil
	}) == nil
}
