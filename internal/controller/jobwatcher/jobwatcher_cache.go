package jobwatcher

import (
	"context"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/internal/scopedcache"
	"github.com/deckhand-dev/deckhand/internal/scopedcache/compact"
)

// CacheByObject keeps Jobs in the manager's cache as slimJob makes them:
// the controller decides from the finish condition, TTL, labels and its
// own annotations, and a cluster can hold thousands of finished Jobs.
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&batchv1.Job{}: {Transform: slimJob},
	}
}

// cachedJob is what the manager's cache holds of a Job: what the
// controller reads from the cache, nothing else (slimJob). It is not a
// batchv1.Job, whose struct alone is 1,320 bytes with its pod template
// zeroed: the scoped cache turns it back into one (expandJob) for every
// read, handler and index (internal/scopedcache/compact.go), so no reader
// changes. Issue 26: a finished Job cost 3.8 KB of live heap cached as a
// slimmed batchv1.Job, 2.1 KB as one rebuilt with only these fields, and
// costs under 1 KiB as a cachedJob (TestCachedJobHeap).
type cachedJob struct {
	// Meta holds name, namespace, UID, resourceVersion, generation,
	// creation and deletion timestamps, labels and Deckhand's annotations,
	// in 192 bytes (a metav1.ObjectMeta is 232 before its labels).
	compact.Meta
	// ttl is spec.ttlSecondsAfterFinished, which leaves the Job to
	// Kubernetes.
	ttl *int32
	// finishedBy is the type of the condition the Job finished by
	// (Complete or Failed, true), "" while it runs; finishedAt its time.
	finishedBy batchv1.JobConditionType
	finishedAt metav1.Time
}

var _ client.Object = &cachedJob{}

// GetObjectKind has no kind: a cachedJob never leaves the cache.
func (c *cachedJob) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies the cachedJob.
func (c *cachedJob) DeepCopyObject() runtime.Object {
	out := &cachedJob{Meta: c.DeepCopy(), finishedBy: c.finishedBy, finishedAt: c.finishedAt}
	if c.ttl != nil {
		out.ttl = ptr.To(*c.ttl)
	}
	return out
}

// job is the batchv1.Job the cachedJob stands for, new: what readers,
// handlers and indexes of the cache see.
func (c *cachedJob) job() *batchv1.Job {
	j := &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job"}, ObjectMeta: c.ObjectMeta()}
	if c.ttl != nil {
		j.Spec.TTLSecondsAfterFinished = ptr.To(*c.ttl)
	}
	if c.finishedBy != "" {
		j.Status.Conditions = []batchv1.JobCondition{{Type: c.finishedBy, Status: corev1.ConditionTrue, LastTransitionTime: c.finishedAt}}
	}
	return j
}

// expandJob is the scoped cache's Need.Expand for Jobs.
func expandJob(held client.Object) (client.Object, bool) {
	c, ok := held.(*cachedJob)
	if !ok {
		return held, false
	}
	return c.job(), true
}

// slimJob is the cache transform for Jobs: a Job is held as a cachedJob,
// with what the controller reads from the cache:
//   - its metadata: name, namespace, UID, resourceVersion, generation,
//     creation and deletion timestamps, labels (for watchers' selectors)
//     and Deckhand's own annotations (batch.deckhand.dev/...); other
//     annotations, owner references, finalizers and managedFields go;
//   - spec.ttlSecondsAfterFinished, which leaves the Job to Kubernetes;
//   - the condition it finished by (Complete or Failed, true): its type
//     and time, no reason, message or interim conditions.
//
// The namespace and the label keys and values are interned (a value equal
// to the Job's name or UID shares that string). What a delete acts on is read
// past the cache (jobwatcher_delete.go), and a failure record from that
// read, so nothing irreversible rests on the slim copy. A reader that
// starts reading another field of a cached Job adds it here and in job.
func slimJob(obj any) (any, error) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return obj, nil // a cachedJob already, a tombstone, or a stub of the scoped cache
	}
	slim := &cachedJob{
		Meta: compact.MetaOf(&metav1.ObjectMeta{
			Name:              job.Name,
			Namespace:         job.Namespace,
			UID:               job.UID,
			ResourceVersion:   job.ResourceVersion,
			Generation:        job.Generation,
			CreationTimestamp: job.CreationTimestamp,
			DeletionTimestamp: job.DeletionTimestamp,
			Labels:            job.Labels,
			Annotations:       deckhandAnnotations(job.Annotations),
		}),
		ttl: job.Spec.TTLSecondsAfterFinished,
	}
	for _, c := range job.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			slim.finishedBy, slim.finishedAt = batchv1.JobComplete, c.LastTransitionTime
			if c.Type == batchv1.JobFailed {
				slim.finishedBy = batchv1.JobFailed
			}
			break
		}
	}
	return slim, nil
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
		Namespaces: jobNamespaces(NewCompiledSpecs()),
		Expand:     expandJob,
		// A new namespace may be one a ClusterJobWatcher reaches.
		Triggers: []client.Object{&deckhandbatchv1.JobWatcher{}, &deckhandbatchv1.ClusterJobWatcher{}, &corev1.Namespace{}},
	}}
}

// jobNamespaces lists the namespaces some watcher reaches, compiling
// ClusterJobWatchers through specs (which keeps only those listed).
// Namespaces are listed only when there is a ClusterJobWatcher.
func jobNamespaces(specs *CompiledSpecs) func(ctx context.Context, r client.Reader) ([]string, error) {
	return func(ctx context.Context, r client.Reader) ([]string, error) { return reachedNamespaces(ctx, r, specs) }
}

func reachedNamespaces(ctx context.Context, r client.Reader, specs *CompiledSpecs) ([]string, error) {
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
	listed := make(map[string]bool, len(cjws.Items))
	for i := range cjws.Items {
		listed[cjws.Items[i].Name] = true
	}
	specs.retain(func(k compileKey) bool { return k.cluster && listed[k.name.Name] })
	if len(cjws.Items) == 0 {
		return out, nil
	}
	var namespaces corev1.NamespaceList
	if err := r.List(ctx, &namespaces, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	// The Jobs of namespaces protected by the operator's list or a label
	// may be cached (this reads the default list only); the reconcilers,
	// which decide, protect them.
	prot := newProtection(nil, nil)
	for i := range cjws.Items {
		p := specs.clusterJobWatcher(&cjws.Items[i], prot)
		for _, ns := range namespaces.Items {
			if p.reaches(ns.Name) {
				out = append(out, ns.Name)
			}
		}
	}
	return out, nil
}
