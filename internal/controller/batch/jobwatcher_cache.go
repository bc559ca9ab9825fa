package batch

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
