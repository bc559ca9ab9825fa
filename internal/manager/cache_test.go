package manager_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	podbuggercontroller "github.com/deckhand-dev/deckhand/internal/controller/podbugger"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
	podsetcontroller "github.com/deckhand-dev/deckhand/internal/controller/podset"
)

// The manager caches pods no PodSet controls without their bodies, and the
// controllers that read pods still do their work: PodBugger injects into
// such a pod, and a PodSet keeps its size on its own pods, cached without
// their template.
func TestSlimmedPodsStillDriveTheControllers(t *testing.T) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(30 * time.Second)
	ctx := context.Background()
	ns := env.NamespaceWithLabels(t, map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})

	opts := env.ManagerOptions()
	opts.Controllers = []string{podsetcontroller.ControllerName, podbuggercontroller.ControllerName}
	opts.PodBuggerAllowedImages = []string{"docker.io/library/busybox:*"}
	mgr, _ := env.StartManager(t, opts)
	serving := mgr.GetWebhookServer().StartedChecker()
	g.Eventually(func() error { return serving(nil) }).Should(Succeed())

	// A pod Deckhand does not own, Running as a kubelet would report it.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{"note": "dropped from the cache"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
			Env: []corev1.EnvVar{{Name: "BIG", Value: "dropped from the cache"}}}}},
	}
	g.Expect(env.Client.Create(ctx, pod)).To(Succeed())
	pod.Status.Phase = corev1.PodRunning
	g.Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())

	cached := &corev1.Pod{}
	g.Eventually(func(g Gomega) {
		g.Expect(mgr.GetClient().Get(ctx, client.ObjectKeyFromObject(pod), cached)).To(Succeed())
		g.Expect(cached.Status.Phase).To(Equal(corev1.PodRunning))
	}).Should(Succeed())
	g.Expect(cached.Labels).To(Equal(pod.Labels))
	g.Expect(cached.Annotations).To(BeEmpty(), "the cache keeps an unowned pod's annotations")
	g.Expect(cached.Spec.Containers).To(Equal([]corev1.Container{{Name: "app"}}), "the cache keeps an unowned pod's container bodies")

	// PodBugger plans on the slimmed pod and injects.
	pb := &debugv1beta1.PodBugger{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dbg"},
		Spec: debugv1beta1.PodBuggerSpec{
			Selector:            metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Image:               "docker.io/library/busybox:1.37",
			TargetContainerName: "app",
		},
	}
	g.Expect(env.Client.Create(ctx, pb)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &corev1.Pod{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), got)).To(Succeed())
		g.Expect(got.Spec.EphemeralContainers).To(ConsistOf(HaveField("Name", policy.ContainerName(pb.Name))))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		got := &debugv1beta1.PodBugger{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pb), got)).To(Succeed())
		g.Expect(got.Status.Installed).To(BeEquivalentTo(1))
	}).Should(Succeed())
	// Seen as a carrier from the cache, it is never injected twice.
	g.Consistently(func(g Gomega) {
		got := &corev1.Pod{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), got)).To(Succeed())
		g.Expect(got.Spec.EphemeralContainers).To(HaveLen(1))
	}).WithTimeout(2 * time.Second).Should(Succeed())

	// A PodSet's pods are cached without the template a namespace editor
	// sized, and the PodSet keeps its size.
	set := &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "set"}, Spec: appsv1beta1.PodSetSpec{Replicas: 2}}
	g.Expect(env.Client.Create(ctx, set)).To(Succeed())
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(mgr.GetClient().List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{appsv1beta1.PodSetLabel: set.Name})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(2))
		for _, p := range pods.Items {
			g.Expect(p.Spec.Containers).To(Equal([]corev1.Container{{Name: "busybox"}}), "the cache keeps a PodSet pod's container bodies")
		}
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		got := &appsv1beta1.PodSet{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(set), got)).To(Succeed())
		g.Expect(got.Status.Replicas).To(BeEquivalentTo(2))
	}).Should(Succeed())
}
