package scopedcache

import (
	"slices"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SetKeepFor shortens how long an unneeded namespace's informer lives, for
// the length of a test.
func SetKeepFor(d time.Duration) (restore func()) {
	old := keepFor
	keepFor = d
	return func() { keepFor = old }
}

// ClusterWideHolds is what the cluster-wide informer of obj's kind holds
// under namespace/name, if it runs.
func ClusterWideHolds(c *Cache, obj client.Object, namespace, name string) (any, bool) {
	k, err := c.kindOf(obj)
	if err != nil || k == nil {
		return nil, false
	}
	k.mu.Lock()
	all := k.spaces[allNamespaces]
	k.mu.Unlock()
	if all == nil {
		return nil, false
	}
	inf, ok := all.informer.(toolscache.SharedIndexInformer)
	if !ok {
		return nil, false
	}
	held, exists, err := inf.GetIndexer().GetByKey(namespace + "/" + name)
	return held, exists && err == nil
}

// IsStub reports whether obj is what the cluster-wide informer holds of an
// object of a namespace nothing needs.
func IsStub(obj any) bool { return isStub(obj) }

// Recorded is how many entries the records of what handlers of obj's kind
// were told hold (handover.go).
func Recorded(c *Cache, obj client.Object) int {
	k, err := c.kindOf(obj)
	if err != nil || k == nil {
		return 0
	}
	k.mu.Lock()
	handlers := slices.Clone(k.handlers)
	k.mu.Unlock()
	n := 0
	for _, r := range handlers {
		r.mu.Lock()
		for _, in := range r.told {
			n += len(in.seen)
		}
		r.mu.Unlock()
	}
	return n
}
