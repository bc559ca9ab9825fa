package manager_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// The manager caches pods and Jobs only where a Deckhand object can act on
// them: a cluster's unrelated pods and Jobs cost it no memory.
func TestManagerCachesPodsAndJobsOnlyWhereItCanAct(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	opts := env.ManagerOptions()
	opts.PodBuggerAllowedImages = []string{"busybox"}
	mgr, _ := env.StartManager(t, opts)
	c, ok := mgr.GetCache().(interface {
		Namespaces(client.Object) ([]string, bool)
	})
	g.Expect(ok).To(BeTrue(), "the manager's cache is %T", mgr.GetCache())
	held := func(obj client.Object) func() []string {
		return func() []string { ns, _ := c.Namespaces(obj); return ns }
	}

	sets, watched, reached, unrelated := env.Namespace(t), env.Namespace(t), env.Namespace(t), env.Namespace(t)
	buggers := env.NamespaceWithLabels(t, map[string]string{"debug.deckhand.dev/enabled": "true"})
	for _, ns := range []string{sets, buggers, watched, reached, unrelated} {
		g.Expect(env.Client.Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job"},
			Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}})).To(Succeed())
	}
	g.Consistently(held(&corev1.Pod{})).WithTimeout(time.Second).ShouldNot(ContainElements(sets, buggers, watched, reached, unrelated))
	g.Consistently(held(&batchv1.Job{})).WithTimeout(time.Second).ShouldNot(ContainElements(sets, buggers, watched, reached, unrelated))

	labels := map[string]string{"app": "scoped"}
	create := func(obj client.Object) {
		g.Expect(env.Client.Create(ctx, obj)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(ctx, obj) })
	}
	create(&appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: sets, Name: "set"}, Spec: appsv1beta1.PodSetSpec{Replicas: 0,
		Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}})
	create(&debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: buggers, Name: "bugger"},
		Spec: debugv1beta1.PodBuggerSpec{Selector: metav1.LabelSelector{MatchLabels: labels}, Image: "busybox"}})
	create(&deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: watched, Name: "watcher"},
		Spec: deckhandbatchv1.JobWatcherSpec{JobPolicy: deckhandbatchv1.JobPolicy{TTLSecondsAfterSucceeded: ptr.To[int32](60)}}})
	create(&deckhandbatchv1.ClusterJobWatcher{ObjectMeta: metav1.ObjectMeta{GenerateName: "reach-"},
		Spec: deckhandbatchv1.ClusterJobWatcherSpec{JobPolicy: deckhandbatchv1.JobPolicy{TTLSecondsAfterSucceeded: ptr.To[int32](60)},
			NamespacePatterns: []string{regexp.QuoteMeta(reached)}}})

	g.Eventually(held(&corev1.Pod{})).Should(ContainElements(sets, buggers))
	g.Eventually(held(&batchv1.Job{})).Should(ContainElements(watched, reached))
	g.Expect(held(&corev1.Pod{})()).NotTo(ContainElements(watched, reached, unrelated))
	g.Expect(held(&batchv1.Job{})()).NotTo(ContainElements(sets, buggers, unrelated))
}
