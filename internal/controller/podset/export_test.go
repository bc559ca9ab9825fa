package podset

import (
	"time"

	"golang.org/x/sync/semaphore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
)

// ObserveCreations does what the pod informer's handler does when the cache
// shows the named new pods of the PodSet with this UID.
func (r *PodSetReconciler) ObserveCreations(uid types.UID, names ...string) {
	for _, name := range names {
		r.expectations.creationObserved(uid, name)
	}
}

// CacheCaughtUp drops the PodSet's expectations: for tests whose reads are
// uncached, so never behind.
func (r *PodSetReconciler) CacheCaughtUp(key types.NamespacedName) {
	r.expectations.forget(key)
}

// NamePodsWith makes the reconciler name new pods with name instead of at
// random.
func (r *PodSetReconciler) NamePodsWith(name func(*appsv1beta1.PodSet) string) {
	r.podName = name
}

// RecordCreated records the Event of a round of creations of pods.
func (r *PodSetReconciler) RecordCreated(set *appsv1beta1.PodSet, pods []*corev1.Pod) {
	r.recordRound(set, EventSuccessfulCreate, "Create", "Created", pods)
}

// PodEventHandler is the handler of the pod informer's events.
func (r *PodSetReconciler) PodEventHandler() handler.Funcs { return r.podEventHandler() }

// LimitCreationsTo replaces the creation budget the workers share
// (creationBudget) with one of bytes.
func (r *PodSetReconciler) LimitCreationsTo(bytes int64) {
	r.creations = semaphore.NewWeighted(bytes)
}

// SyncBegan records that the PodSet key's last sync began at at.
func (r *PodSetReconciler) SyncBegan(key types.NamespacedName, at time.Time) {
	r.syncs.Began(key, at)
}

// Holding says whether the PodSet key's status is held back at now (a
// replacement's news: podset_replacing.go).
func (r *PodSetReconciler) Holding(key types.NamespacedName, now time.Time) bool {
	return r.replacing.Wait(key, now, statusInterval, true) > 0
}
