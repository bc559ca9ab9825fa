package podbugger_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podbuggercontroller "github.com/deckhand-dev/deckhand/internal/controller/podbugger"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/podbuggertest"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/faultinject"
)

// An ephemeral container can never be removed, so maxPods must hold even
// when the cache has not seen the containers just added: a pod that became
// Running since (fresh in the cache) must not take a slot the stale view
// shows as free.
func TestMaxPodsHoldsWhenTheCacheLags(t *testing.T) {
	g := testenv.NewG(t)
	ns := podbuggertest.EnabledNamespace(t, env)
	// The manager serves the webhook (so the PodBugger can be created) but
	// watches another namespace: this test drives Reconcile itself.
	opts := podbuggertest.Options(env)
	opts.WatchNamespaces = []string{"kube-system"}
	env.StartManager(t, opts)

	for _, p := range []struct {
		name    string
		running bool
	}{{"web-a", true}, {"web-b", false}, {"web-c", true}} {
		pod(t, ns, p.name, podbuggertest.Web, p.running)
	}
	pb := podbuggertest.PodBugger(ns, "web-debug", podbuggertest.Web)
	pb.Spec.MaxPods = 2
	g.Expect(env.Client.Create(ctx, pb)).To(Succeed())
	beforeInjection := &corev1.PodList{}
	g.Expect(env.Client.List(ctx, beforeInjection, client.InNamespace(ns))).To(Succeed())

	p, err := policy.From(opts.Options)
	g.Expect(err).NotTo(HaveOccurred())
	reconciler := func(c client.Client) *podbuggercontroller.PodBuggerReconciler {
		return podbuggercontroller.NewPodBuggerReconciler(c, env.Client, events.NewFakeRecorder(100), p)
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pb)}

	// First pass, on an up-to-date view: web-a and web-c get the container.
	_, err = reconciler(env.Client).Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(podbuggertest.Ephemeral(env, ns, "web-a")()).To(HaveLen(1))
	g.Expect(podbuggertest.Ephemeral(env, ns, "web-c")()).To(HaveLen(1))

	// web-b starts running; the cache has seen that, not the injections.
	b := &corev1.Pod{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-b"}, b)).To(Succeed())
	podbuggertest.SetRunning(t, env, b)
	stale := beforeInjection.DeepCopy()
	for i := range stale.Items {
		if stale.Items[i].Name == "web-b" {
			stale.Items[i] = *b
		}
	}

	_, _ = reconciler(faultinject.StaleLists(env.Client, stale)).Reconcile(ctx, req)
	g.Expect(podbuggertest.Ephemeral(env, ns, "web-b")()).To(BeEmpty(), "maxPods 2 is already reached by web-a and web-c")
}
