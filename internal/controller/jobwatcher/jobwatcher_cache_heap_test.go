package jobwatcher

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/deckhand-dev/deckhand/internal/testenv/proc"
)

// maxCachedJobBytes is what a finished Job may cost the cache's heap, with
// its entries in the informer's store and namespace index. The typed
// batchv1.Job alone is 1,320 bytes (1,408 allocated) before any string: it
// is held as a cachedJob. Issue 26's target is 1 KiB for all the manager
// spends on a Job, and the manager spends more than the cache holds (its
// queue, the handover record): 677 B with a metav1.ObjectMeta, 597 B with
// compact.Meta.
const maxCachedJobBytes = 640

// finishedJobJSON is a finished Job as the apiserver sends it: labels the
// Job controller's way, a selector, a pod template, managedFields, the
// status of a success.
func finishedJobJSON(t testing.TB, i int) []byte {
	t.Helper()
	name, uid := fmt.Sprintf("nightly-report-%d", i), fmt.Sprintf("5f0c6a3e-8a43-4b0e-9d1e-%012d", i)
	ids := map[string]string{batchv1.ControllerUidLabel: uid, batchv1.JobNameLabel: name, "controller-uid": uid, "job-name": name}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "reports", UID: types.UID(uid), ResourceVersion: fmt.Sprint(100000 + i), Generation: 1,
			CreationTimestamp: metav1.Now(), Labels: ids,
			Annotations:   map[string]string{"batch.kubernetes.io/job-tracking": ""},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "batch/v1", Subresource: "status"}},
		},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), BackoffLimit: ptr.To[int32](6),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: uid}},
			Suspend:  ptr.To(false), CompletionMode: ptr.To(batchv1.NonIndexedCompletion),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: ids},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "report", Image: "registry.example/report:1.2", Command: []string{"/report", "--day"}}}},
			},
		},
	}
	// As testenv.FinishJob writes it (an import cycle keeps it out).
	at, start := metav1.NewTime(time.Now().Add(-time.Hour)), metav1.NewTime(time.Now().Add(-time.Hour-time.Second))
	job.Status = batchv1.JobStatus{StartTime: &start, CompletionTime: &at, Succeeded: 1, Ready: ptr.To[int32](0), Terminating: ptr.To[int32](0),
		UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{},
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastProbeTime: at, LastTransitionTime: at, Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods"},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastProbeTime: at, LastTransitionTime: at, Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods"},
		}}
	raw, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// A finished Job costs the cache what its decisions read, not the 4 KB a
// slimmed typed Job cost at N = 10,000 (issue 26). Each Job is decoded on
// its own, as a watch (or a streamed list) delivers it.
func TestCachedJobHeap(t *testing.T) {
	const n = 10000
	raws := make([][]byte, n)
	for i := range raws {
		raws[i] = finishedJobJSON(t, i)
	}
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	before := proc.LiveHeap()
	for i := range raws {
		job := &batchv1.Job{}
		if err := json.Unmarshal(raws[i], job); err != nil {
			t.Fatal(err)
		}
		obj, err := slimJob(job)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	per := (proc.LiveHeap() - before) / n
	runtime.KeepAlive(store)
	runtime.KeepAlive(raws)
	t.Logf("%d B of live heap per cached Job", per)
	if per > maxCachedJobBytes {
		t.Errorf("a cached Job costs %d B of heap, more than %d", per, maxCachedJobBytes)
	}
}
