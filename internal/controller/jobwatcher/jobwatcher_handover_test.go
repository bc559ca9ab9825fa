package jobwatcher

import (
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

// The scoped cache hands a namespace from one informer to another (a
// switch across its cluster-wide threshold) by telling each handler the
// Jobs it was never told as the initial list they are
// (internal/scopedcache, TestAHandoverTellsWhatWasNeverToldAsTheInitialList).
// The Job handler computes no history for such an Add: each Job is judged,
// its history included, by Reconcile, where the history is memoized. A
// handover of N Jobs told as N non-initial Adds computed the namespace's
// history N times over N Jobs under the cache's delivery lock (every Job
// delivery of the cluster waited).
func TestAHandoverOfJobsComputesNoHistoryPerJob(t *testing.T) {
	const n, limit = 1000, 10
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = deckhandbatchv1.AddToScheme(scheme)
	w := &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", UID: "w-1", Generation: 1}}
	w.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](limit)
	objs := make([]client.Object, 0, 1+n)
	objs = append(objs, w)
	jobs := make([]*batchv1.Job, 0, n)
	at := time.Now().Add(-time.Hour)
	for i := range n {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("job-%04d", i)}}
		job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(at.Add(time.Duration(i) * time.Second))}}
		jobs = append(jobs, job)
		objs = append(objs, job)
	}
	c := &JobLists{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()}
	r := NewTestJobReconciler(c, c, nil, events.NewFakeRecorder(10))
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()

	h := r.jobEvents()
	start := time.Now()
	for _, job := range jobs {
		h.Create(t.Context(), event.CreateEvent{Object: job, IsInInitialList: true}, q)
	}
	t.Logf("a handover of %d Jobs: %v in the handler, the history computed %d times", n, time.Since(start).Round(time.Millisecond), c.N.Load())
	if got := c.N.Load(); got > 1 {
		t.Fatalf("a handover of %d Jobs of one namespace computed its history %d times in the handler, want at most once", n, got)
	}
	if q.Len() != n {
		t.Fatalf("a handover of %d Jobs queued %d", n, q.Len())
	}
}
