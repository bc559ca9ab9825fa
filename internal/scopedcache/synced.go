package scopedcache

import (
	"context"
	"time"

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
// needed), on the path of a restart's first deletion (issue 26).
//
// Each check is a WaitForCacheSync whose context ends syncedPoll later:
// its first look at the informers comes at once, and when they have not
// synced it gives up at that deadline. Not a context already done: a
// controller-runtime cache picks at random between "started" and "done"
// when both are ready (Informers.waitForStarted), once for each of its
// caches by kind, so a check with a done context said "not synced" to a
// synced cache most of the time (a restart over 1,000 Jobs listed them
// 3.8 s after the start instead of 0.25 s).
func InnerSynced(ctx context.Context, inner cache.Cache) bool {
	for {
		check, cancel := context.WithTimeout(ctx, syncedPoll)
		synced := inner.WaitForCacheSync(check)
		if !synced {
			<-check.Done() // one check per syncedPoll
		}
		cancel()
		switch {
		case synced:
			return true
		case ctx.Err() != nil:
			return false
		}
	}
}
