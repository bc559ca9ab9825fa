package podbugger_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	podbuggercontroller "github.com/deckhand-dev/deckhand/internal/controller/podbugger"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/podbuggertest"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/faultinject"
)

// webhookOnly starts a manager that serves the webhook (so PodBuggers can be
// created) but watches another namespace: the test drives Reconcile itself,
// with a clock of its own.
func webhookOnly(t *testing.T) policy.Policy {
	t.Helper()
	opts := podbuggertest.Options(env)
	opts.WatchNamespaces = []string{"kube-system"}
	env.StartManager(t, opts)
	p, err := policy.From(opts.Options)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// restrictedPod creates a running pod that meets the Pod Security
// restricted level.
func restrictedPod(t *testing.T, ns, name string) {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: podbuggertest.Web},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				}}},
		},
	}
	env.Create(t, p)
	podbuggertest.SetRunning(t, env, p)
}

// A pod whose injection the apiserver refuses must neither take a place
// within maxPods nor cost an uncached list, a failing update and a Warning
// Event on every event of the namespace: it is retried with a backoff, a few
// times.
func TestRefusedPodsAreRememberedAndFreeTheirPlace(t *testing.T) {
	g := testenv.NewG(t)
	ns := podbuggertest.EnabledNamespace(t, env)
	p := webhookOnly(t)

	// web-1-root runs as root and predates the restricted level: Pod Security
	// refuses any ephemeral container in it.
	pod(t, ns, "web-1-root", podbuggertest.Web, true)
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	g.Expect(env.Update(namespace, func() { namespace.Labels["pod-security.kubernetes.io/enforce"] = "restricted" })).To(Succeed())
	restrictedPod(t, ns, "web-2")
	restrictedPod(t, ns, "web-3")
	pb := podbuggertest.PodBugger(ns, "web-debug", podbuggertest.Web)
	pb.Spec.MaxPods = 2
	g.Expect(env.Client.Create(ctx, pb)).To(Succeed())

	reads := &faultinject.CountingReader{Reader: env.Client}
	r := podbuggercontroller.NewPodBuggerReconciler(env.Client, reads, events.NewFakeRecorder(100), p)
	now := time.Now()
	r.Now = func() time.Time { return now }
	reconcile := func() {
		t.Helper()
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pb)})
		g.Expect(err).NotTo(HaveOccurred())
	}
	failed := func() (float64, error) {
		return testenv.Metric("deckhand_podbugger_injections_total", map[string]string{"namespace": ns, "podbugger": pb.Name, "result": "failed"})
	}

	reconcile()
	g.Expect(podbuggertest.Ephemeral(env, ns, "web-1-root")()).To(BeEmpty())
	g.Expect(podbuggertest.Ephemeral(env, ns, "web-2")()).To(HaveLen(1))
	g.Expect(podbuggertest.Ephemeral(env, ns, "web-3")()).To(HaveLen(1), "web-1-root's place within maxPods goes to the next pod")
	g.Expect(failed()).To(BeEquivalentTo(1))
	g.Expect(podbuggertest.Status(env, pb)()).To(And(installed(2),
		podbuggertest.Condition(debugv1beta1.ConditionReady, metav1.ConditionFalse, debugv1beta1.ReasonInjectionFailed),
		HaveField("Conditions", ContainElement(HaveField("Message", ContainSubstring("pod web-1-root"))))))

	// web-2 goes, a place is free, and web-1-root is the only candidate: pod
	// events do not bring its refusal back before its backoff ends.
	g.Expect(env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-2"}},
		client.GracePeriodSeconds(0))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-2"}, &corev1.Pod{}))
	}).Should(BeTrue())
	lists := reads.Lists()
	for range 3 {
		reconcile()
	}
	g.Expect(failed()).To(BeEquivalentTo(1))
	g.Expect(reads.Lists()).To(Equal(lists), "no uncached list for a pod that is not due")

	// After the backoff it is tried again, five times in all.
	for range 10 {
		now = now.Add(time.Hour)
		reconcile()
	}
	g.Expect(failed()).To(BeEquivalentTo(5))
	g.Expect(podbuggertest.Status(env, pb)()).To(podbuggertest.Condition(debugv1beta1.ConditionReady, metav1.ConditionFalse, debugv1beta1.ReasonInjectionFailed))
}

// A pod that cannot take the container is reported once, not on every pass.
func TestSkippedPodsAreCountedOncePerPod(t *testing.T) {
	g := testenv.NewG(t)
	ns := podbuggertest.EnabledNamespace(t, env)
	p := webhookOnly(t)
	pod(t, ns, "web-1", podbuggertest.Web, true) // its container is "app"
	pb := podbuggertest.PodBugger(ns, "web-debug", podbuggertest.Web)
	pb.Spec.TargetContainerName = "nginx"
	g.Expect(env.Client.Create(ctx, pb)).To(Succeed())

	recorder := events.NewFakeRecorder(100)
	r := podbuggercontroller.NewPodBuggerReconciler(env.Client, env.Client, recorder, p)
	for range 3 {
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pb)})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(testenv.Metric("deckhand_podbugger_injections_total",
		map[string]string{"namespace": ns, "podbugger": pb.Name, "result": "skipped"})).To(BeEquivalentTo(1))
	g.Expect(recorder.Events).To(HaveLen(1))
}

// The opt-in label is read from the apiserver before an injection: once an
// admin removes it, no pod gets a container, even if the cache still shows
// the label.
func TestOptOutTakesEffectBeforeTheCacheSeesIt(t *testing.T) {
	g := testenv.NewG(t)
	ns := podbuggertest.EnabledNamespace(t, env)
	p := webhookOnly(t)
	pod(t, ns, "web-1", podbuggertest.Web, true)
	pb := podbuggertest.PodBugger(ns, "web-debug", podbuggertest.Web)
	g.Expect(env.Client.Create(ctx, pb)).To(Succeed())

	cached := &corev1.Namespace{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns}, cached)).To(Succeed())
	setNamespaceLabel(t, ns, "false")

	r := podbuggercontroller.NewPodBuggerReconciler(faultinject.StaleGets(env.Client, cached), env.Client, events.NewFakeRecorder(100), p)
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pb)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(podbuggertest.Ephemeral(env, ns, "web-1")()).To(BeEmpty())
	g.Expect(podbuggertest.Status(env, pb)()).To(podbuggertest.Condition(debugv1beta1.ConditionBlocked, metav1.ConditionTrue, debugv1beta1.ReasonNamespaceNotEnabled))
}
