package jobwatcher

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/internal/scopedcache"
)

// CacheByObject keeps Jobs in the manager's cache without their pod
// template: the controller decides from status, TTL, labels and
// annotations, and a cluster can hold thousands of finished Jobs whose
// templates would otherwise dominate the cache.
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&batchv1.Job{}: {Transform: slimJob},
	}
}

// slimJob drops what Deckhand never reads from a cached Job: managedFields
// and the pod template. Deletion decisions re-read the Job from the
// apiserver, so nothing acts on the slimmed copy alone.
func slimJob(obj any) (any, error) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return obj, nil
	}
	job.ManagedFields = nil
	job.Spec.Template = corev1.PodTemplateSpec{}
	return job, nil
}

// Needs says where the manager must cache Jobs for this controller: in the
// namespaces of JobWatchers and in those ClusterJobWatchers reach. Jobs of
// other namespaces are no watcher's, and are not cached at all.
func Needs() []scopedcache.Need {
	return []scopedcache.Need{{
		Object:     &batchv1.Job{},
		Namespaces: jobNamespaces,
		// A new namespace may be one a ClusterJobWatcher reaches.
		Triggers: []client.Object{&deckhandbatchv1.JobWatcher{}, &deckhandbatchv1.ClusterJobWatcher{}, &corev1.Namespace{}},
	}}
}

// jobNamespaces lists the namespaces some watcher reaches. Namespaces are
// listed only when there is a ClusterJobWatcher.
func jobNamespaces(ctx context.Context, r client.Reader) ([]string, error) {
	var jws deckhandbatchv1.JobWatcherList
	if err := r.List(ctx, &jws, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing JobWatchers: %w", err)
	}
	var out []string
	for i := range jws.Items {
		out = append(out, jws.Items[i].Namespace)
	}
	var cjws deckhandbatchv1.ClusterJobWatcherList
	if err := r.List(ctx, &cjws, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing ClusterJobWatchers: %w", err)
	}
	if len(cjws.Items) == 0 {
		return out, nil
	}
	var namespaces corev1.NamespaceList
	if err := r.List(ctx, &namespaces, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	for i := range cjws.Items {
		p := compileClusterJobWatcher(&cjws.Items[i])
		for _, ns := range namespaces.Items {
			if p.reaches(ns.Name) {
				out = append(out, ns.Name)
			}
		}
	}
	return out, nil
}
