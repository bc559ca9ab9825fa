package jobwatcher

import (
	"context"
	"fmt"
	"strings"
	"unique"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/internal/scopedcache"
)

// CacheByObject keeps Jobs in the manager's cache as slimJob makes them:
// the controller decides from the finish condition, TTL, labels and its
// own annotations, and a cluster can hold thousands of finished Jobs.
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&batchv1.Job{}: {Transform: slimJob},
	}
}

// slimJob is the cache transform for Jobs. A cached Job keeps what the
// controller reads from the cache, nothing else:
//   - its metadata: name, namespace, UID, resourceVersion, generation,
//     creation and deletion timestamps, labels (for watchers' selectors)
//     and Deckhand's own annotations (batch.deckhand.dev/...); other
//     annotations, owner references, finalizers and managedFields go;
//   - spec.ttlSecondsAfterFinished, which leaves the Job to Kubernetes;
//   - the condition it finished by (Complete or Failed, true), with its
//     type, status and time: no reason, message, probe time, or the
//     interim conditions.
//
// Strings that repeat are shared, not held once per Job: the namespace
// and label keys (interned), label values equal to the Job's name or UID
// (the Job controller's job-name and controller-uid labels), the
// condition's type and status. What a delete acts on is read past the
// cache (jobwatcher_delete.go), and a failure record from that read, so
// nothing irreversible rests on the slim copy. A reader that starts
// reading another field of a cached Job adds it here.
func slimJob(obj any) (any, error) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return obj, nil // a tombstone, or a stub of the scoped cache
	}
	slim := &batchv1.Job{
		TypeMeta: job.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              job.Name,
			Namespace:         unique.Make(job.Namespace).Value(),
			UID:               job.UID,
			ResourceVersion:   job.ResourceVersion,
			Generation:        job.Generation,
			CreationTimestamp: job.CreationTimestamp,
			DeletionTimestamp: job.DeletionTimestamp,
			Labels:            slimLabels(job),
			Annotations:       deckhandAnnotations(job.Annotations),
		},
	}
	slim.Spec.TTLSecondsAfterFinished = job.Spec.TTLSecondsAfterFinished
	for _, c := range job.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			t := batchv1.JobComplete
			if c.Type == batchv1.JobFailed {
				t = batchv1.JobFailed
			}
			slim.Status.Conditions = []batchv1.JobCondition{{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: c.LastTransitionTime}}
			break
		}
	}
	return slim, nil
}

// slimLabels are job's labels with their keys interned and the values
// that repeat its name or UID sharing those strings.
func slimLabels(job *batchv1.Job) map[string]string {
	if len(job.Labels) == 0 {
		return nil
	}
	out := make(map[string]string, len(job.Labels))
	for k, v := range job.Labels {
		switch v {
		case job.Name:
			v = job.Name
		case string(job.UID):
			v = string(job.UID)
		}
		out[unique.Make(k).Value()] = v
	}
	return out
}

// deckhandAnnotations are the annotations of Deckhand's batch group
// (ttl, keep): the only ones the controller reads.
func deckhandAnnotations(in map[string]string) map[string]string {
	var out map[string]string
	for k, v := range in {
		if strings.HasPrefix(k, deckhandAnnotationPrefix) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// deckhandAnnotationPrefix is the prefix of the annotations a Job carries
// for Deckhand.
const deckhandAnnotationPrefix = "batch.deckhand.dev/"

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
