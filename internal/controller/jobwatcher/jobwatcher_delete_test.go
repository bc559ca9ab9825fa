package jobwatcher

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

// TestDeleteJudgesWhatTheServerHoldsNow is the unit test of the last look
// before a delete: the cache says the Job is due, but the API server holds
// something else by then. (That the controller deletes at all, on a real API
// server, is what the envtest and e2e tests show.)
func TestDeleteJudgesWhatTheServerHoldsNow(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = deckhandbatchv1.AddToScheme(scheme)
	watcher := func(name string, ttl int32) *deckhandbatchv1.JobWatcher {
		w := &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}}
		w.Spec.TTLSecondsAfterSucceeded = ptr.To(ttl)
		return w
	}
	cachedWatcher := watcher("short", 10)

	tests := map[string]struct {
		// server changes the Job (and may add objects) after the cache saw it.
		server      func(job *batchv1.Job) []client.Object
		wantDeleted bool
		wantRequeue bool
		// serverWatcher is the governing watcher on the server (nil: gone).
		serverWatcher func(w *deckhandbatchv1.JobWatcher) client.Object
	}{
		"unchanged": {func(*batchv1.Job) []client.Object { return nil }, true, false, nil},
		"annotated keep": {func(j *batchv1.Job) []client.Object {
			withAnnotation(deckhandbatchv1.KeepAnnotation, "true")(j)
			return nil
		}, false, false, nil},
		"given its own TTL":     {func(j *batchv1.Job) []client.Object { j.Spec.TTLSecondsAfterFinished = ptr.To[int32](60); return nil }, false, false, nil},
		"replaced by a new Job": {func(j *batchv1.Job) []client.Object { j.UID = "new"; return nil }, false, false, nil},
		"given a longer TTL": {func(j *batchv1.Job) []client.Object {
			withAnnotation(deckhandbatchv1.TTLAnnotation, "24h")(j)
			return nil
		}, false, true, nil},
		// Other watchers are judged as the cache shows them: a watcher
		// change is in effect once its status.observedGeneration shows it.
		"a watcher the cache does not show yet": {func(*batchv1.Job) []client.Object { return []client.Object{watcher("long", 86400)} }, true, false, nil},
		// The governing watcher is read past the cache: the deletion is
		// made on its say only as it is now.
		"its watcher is gone": {func(*batchv1.Job) []client.Object { return nil }, false, true,
			func(*deckhandbatchv1.JobWatcher) client.Object { return nil }},
		"its watcher is being deleted": {func(*batchv1.Job) []client.Object { return nil }, false, true,
			func(w *deckhandbatchv1.JobWatcher) client.Object {
				w.Finalizers, w.DeletionTimestamp = []string{"test"}, ptr.To(metav1.Now())
				return w
			}},
		"its watcher was replaced": {func(*batchv1.Job) []client.Object { return nil }, false, true,
			func(w *deckhandbatchv1.JobWatcher) client.Object { w.UID = "other"; return w }},
		"its watcher changed": {func(*batchv1.Job) []client.Object { return nil }, false, true,
			func(w *deckhandbatchv1.JobWatcher) client.Object { w.Generation = 2; return w }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cached := testJob("ns", "pi", succeeded)
			cached.UID, cached.Status.Conditions[0].LastTransitionTime = "old", metav1.NewTime(time.Now().Add(-time.Minute))
			onServer := cached.DeepCopy()
			extra := append(tc.server(onServer), onServer)
			serverWatcher := client.Object(cachedWatcher.DeepCopy())
			if tc.serverWatcher != nil {
				serverWatcher = tc.serverWatcher(cachedWatcher.DeepCopy())
			}
			if serverWatcher != nil {
				extra = append(extra, serverWatcher)
			}
			server := fake.NewClientBuilder().WithScheme(scheme).WithObjects(extra...).Build()
			// The cache: the Job and the watchers as they were.
			cache := interceptor.NewClient(server, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if job, ok := obj.(*batchv1.Job); ok {
						cached.DeepCopyInto(job)
						return nil
					}
					return c.Get(ctx, key, obj, opts...)
				},
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if l, ok := list.(*deckhandbatchv1.JobWatcherList); ok {
						l.Items = []deckhandbatchv1.JobWatcher{*cachedWatcher.DeepCopy()}
						return nil
					}
					return c.List(ctx, list, opts...)
				},
			})
			r := NewTestJobReconciler(cache, server, nil, events.NewFakeRecorder(10))

			res, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(cached)})
			if err != nil {
				t.Fatal(err)
			}
			err = server.Get(t.Context(), client.ObjectKeyFromObject(cached), &batchv1.Job{})
			if deleted := apierrors.IsNotFound(err); deleted != tc.wantDeleted {
				t.Errorf("deleted = %v, want %v (get: %v)", deleted, tc.wantDeleted, err)
			}
			if requeue := res.RequeueAfter > 0; requeue != tc.wantRequeue {
				t.Errorf("requeue after %s, want a requeue: %v", res.RequeueAfter, tc.wantRequeue)
			}
		})
	}
}

// A delete of a Job the cache showed due carries the cached UID and
// resourceVersion as preconditions: the compact cache must hand back the
// ones the API server sent, or every such delete would be refused (and the
// Job read past the cache again).
func TestCachedJobKeepsWhatTheDeleteRestsOn(t *testing.T) {
	job := testJob("ns", "pi", succeeded)
	job.UID, job.ResourceVersion = "uid-1", "12345"
	held, err := slimJob(job)
	if err != nil {
		t.Fatal(err)
	}
	read, ok := expandJob(held.(client.Object))
	if !ok {
		t.Fatalf("expandJob(%T) did not expand", held)
	}
	if got := read.GetUID(); got != job.UID {
		t.Errorf("UID = %q, want %q", got, job.UID)
	}
	if got := read.GetResourceVersion(); got != job.ResourceVersion {
		t.Errorf("resourceVersion = %q, want %q", got, job.ResourceVersion)
	}
}
