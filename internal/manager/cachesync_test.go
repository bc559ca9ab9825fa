package manager_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/faultinject"
)

// A controller starts once the kinds it reads have synced, not once every
// kind of the manager's cache has: with the pods of a PodSet's namespace
// impossible to list (as a slow list of thousands of pods is, only longer),
// a JobWatcher still deletes its due Job. The manager used to start no
// controller before every kind had synced, so the JobWatcher waited for
// pods it never reads. /readyz still waits for every kind.
func TestAControllerDoesNotWaitForKindsItDoesNotRead(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	opts := env.ManagerOptions()
	_, stop := env.StartManager(t, opts) // its webhooks admit the PodSet and the watcher
	set := &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "set"}, Spec: appsv1beta1.PodSetSpec{Replicas: 0,
		Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "set"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
	g.Expect(env.Client.Create(ctx, set)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, set) })
	w := &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}}
	w.Spec.TTLSecondsAfterSucceeded = ptr.To[int32](0)
	g.Expect(env.Client.Create(ctx, w)).To(Succeed())
	stop()
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "etl"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
	g.Expect(env.Client.Create(ctx, job)).To(Succeed())
	testenv.FinishJob(job, batchv1.JobComplete, time.Now().Add(-time.Minute))
	g.Expect(env.Client.Status().Update(ctx, job)).To(Succeed())

	outage := faultinject.NewOutage("/pods")
	outage.Begin()
	defer outage.End()
	opts.HealthProbeBindAddress = testenv.FreeAddr(t)
	env.StartManagerWithConfig(t, outage.Config(env.Config), opts)

	g.Eventually(env.Exists(job)).WithTimeout(30*time.Second).Should(BeFalse(),
		"the JobWatcher waited for pods it does not read")
	ready := func() (int, error) {
		resp, err := http.Get("http://" + opts.HealthProbeBindAddress + "/readyz")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		return resp.StatusCode, nil
	}
	g.Expect(ready()).NotTo(Equal(http.StatusOK), "ready with the pods' cache not synced")
	outage.End()
	g.Eventually(ready).WithTimeout(30 * time.Second).Should(Equal(http.StatusOK))
}
