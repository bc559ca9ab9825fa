package jobwatcher_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

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
	env.Create(t, job)
	if how != "" {
		finish(t, job, how, at)
	}
	return job
}

func finish(t testing.TB, job *batchv1.Job, how batchv1.JobConditionType, at time.Time) {
	t.Helper()
	testenv.FinishJob(job, how, at)
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
