package apps

import "k8s.io/apimachinery/pkg/types"

// ObserveCreations does what the pod informer's handler does when the cache
// shows n new pods of the PodSet with this UID.
func (r *PodSetReconciler) ObserveCreations(uid types.UID, n int) {
	for range n {
		r.expectations.creationObserved(uid, "")
	}
}

// CacheCaughtUp drops the PodSet's expectations: for tests whose reads are
// uncached, so never behind.
func (r *PodSetReconciler) CacheCaughtUp(key types.NamespacedName) {
	r.expectations.forget(key)
}
