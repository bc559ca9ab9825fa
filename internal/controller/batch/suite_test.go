package batch_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

const timeout = 30 * time.Second

// newJob returns a Job with a minimal pod template; envtest runs no Job
// controller, so it stays as created until finish sets its status.
func newJob(ns, name string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
		}}},
	}
}

// createJob creates job and, unless how is empty, marks it finished at the
// given time the way the Job controller would: Complete (after
// SuccessCriteriaMet) or Failed (after FailureTarget).
func createJob(t testing.TB, job *batchv1.Job, how batchv1.JobConditionType, at time.Time) *batchv1.Job {
	t.Helper()
	ctx := context.Background()
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatalf("creating Job: %v", err)
	}
	if how != "" {
		finish(t, job, how, at)
	}
	return job
}

func finish(t testing.TB, job *batchv1.Job, how batchv1.JobConditionType, at time.Time) {
	t.Helper()
	ltt := metav1.NewTime(at)
	start := metav1.NewTime(at.Add(-time.Second))
	job.Status.StartTime = &start
	interim := batchv1.JobSuccessCriteriaMet
	if how == batchv1.JobFailed {
		interim = batchv1.JobFailureTarget
		job.Status.Failed = 1
	} else {
		job.Status.Succeeded = 1
		job.Status.CompletionTime = &ltt
	}
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: interim, Status: corev1.ConditionTrue, LastTransitionTime: ltt, Reason: "Test"},
		{Type: how, Status: corev1.ConditionTrue, LastTransitionTime: ltt, Reason: "Test"},
	}
	if err := env.Client.Status().Update(context.Background(), job); err != nil {
		t.Fatalf("finishing Job %s: %v", job.Name, err)
	}
}

func jobWatcher(ns, name string, succeeded, failed *int32) *deckhandbatchv1.JobWatcher {
	w := &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	w.Spec.TTLSecondsAfterSucceeded, w.Spec.TTLSecondsAfterFailed = succeeded, failed
	return w
}

func clusterJobWatcher(t testing.TB, succeeded, failed *int32, namespaces ...string) *deckhandbatchv1.ClusterJobWatcher {
	w := &deckhandbatchv1.ClusterJobWatcher{ObjectMeta: metav1.ObjectMeta{GenerateName: "cjw-"}}
	w.Spec.TTLSecondsAfterSucceeded, w.Spec.TTLSecondsAfterFailed = succeeded, failed
	w.Spec.NamespacePatterns = namespaces
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), w) })
	return w
}

func create(t testing.TB, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// exists reports whether obj is still there (and not being deleted).
func exists(obj client.Object) func() (bool, error) {
	return func() (bool, error) {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && obj.GetDeletionTimestamp().IsZero(), err
	}
}

// events returns "reason: note" of the Events regarding obj.
func events(ns string, obj client.Object) func() ([]string, error) {
	return func() ([]string, error) {
		var list eventsv1.EventList
		if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		var out []string
		for _, e := range list.Items {
			if e.Regarding.Name == obj.GetName() && e.Regarding.UID == obj.GetUID() {
				out = append(out, fmt.Sprintf("%s: %s", e.Reason, e.Note))
			}
		}
		return out, nil
	}
}

func status(w client.Object) func() (deckhandbatchv1.JobWatcherStatus, error) {
	return func() (deckhandbatchv1.JobWatcherStatus, error) {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(w), w)
		switch w := w.(type) {
		case *deckhandbatchv1.JobWatcher:
			return w.Status, err
		case *deckhandbatchv1.ClusterJobWatcher:
			return w.Status, err
		}
		return deckhandbatchv1.JobWatcherStatus{}, fmt.Errorf("not a watcher: %T", w)
	}
}

func i32(v int32) *int32 { return ptr.To(v) }

// startManager runs a manager for the test and waits until its webhook
// server serves: without it, no watcher can be created.
func startManager(t *testing.T) (stop func()) {
	t.Helper()
	mgr, stop := env.StartManager(t, env.ManagerOptions())
	serving := mgr.GetWebhookServer().StartedChecker()
	deadline := time.Now().Add(timeout)
	for serving(&http.Request{}) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the webhook server did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return stop
}

// update applies mutate to the latest obj and writes it, retrying on
// conflicts (the controller writes watchers' status meanwhile).
func update(obj client.Object, mutate func()) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate()
		return env.Client.Update(context.Background(), obj)
	})
}
