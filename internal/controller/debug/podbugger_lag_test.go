package debug_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugcontroller "github.com/deckhand-dev/deckhand/internal/controller/debug"
	debugwebhook "github.com/deckhand-dev/deckhand/internal/webhook/debug/v1alpha1"
)

// lagging is a client whose pod lists are a snapshot: a cache that has not
// seen the latest pod updates yet.
type lagging struct {
	client.Client
	pods *corev1.PodList
}

func (l lagging) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if pods, ok := list.(*corev1.PodList); ok {
		l.pods.DeepCopyInto(pods)
		return nil
	}
	return l.Client.List(ctx, list, opts...)
}

// An ephemeral container can never be removed, so maxPods must hold even
// when the cache has not seen the containers just added: a pod that became
// Running since (fresh in the cache) must not take a slot the stale view
// shows as free.
func TestMaxPodsHoldsWhenTheCacheLags(t *testing.T) {
	g := newG(t)
	ns := enabledNamespace(t)
	// The manager serves the webhook (so the PodBugger can be created) but
	// watches another namespace: this test drives Reconcile itself.
	opts := options()
	opts.WatchNamespaces = []string{"kube-system"}
	startManager(t, opts)

	for _, p := range []struct {
		name    string
		running bool
	}{{"web-a", true}, {"web-b", false}, {"web-c", true}} {
		pod(t, ns, p.name, web, p.running)
	}
	pb := podBugger(ns, "web-debug", web)
	pb.Spec.MaxPods = 2
	g.Expect(env.Client.Create(ctx, pb)).To(Succeed())
	beforeInjection := &corev1.PodList{}
	g.Expect(env.Client.List(ctx, beforeInjection, client.InNamespace(ns))).To(Succeed())

	images, err := debugwebhook.ParseImagePatterns(opts.PodBuggerAllowedImages)
	g.Expect(err).NotTo(HaveOccurred())
	reconciler := func(c client.Client) *debugcontroller.PodBuggerReconciler {
		return &debugcontroller.PodBuggerReconciler{Client: c, APIReader: env.Client,
			Recorder: events.NewFakeRecorder(100), Policy: debugwebhook.Policy{AllowedImages: images}}
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pb)}

	// First pass, on an up-to-date view: web-a and web-c get the container.
	_, err = reconciler(env.Client).Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ephemeral(ns, "web-a")()).To(HaveLen(1))
	g.Expect(ephemeral(ns, "web-c")()).To(HaveLen(1))

	// web-b starts running; the cache has seen that, not the injections.
	b := &corev1.Pod{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-b"}, b)).To(Succeed())
	setRunning(t, b)
	stale := beforeInjection.DeepCopy()
	for i := range stale.Items {
		if stale.Items[i].Name == "web-b" {
			stale.Items[i] = *b
		}
	}

	_, _ = reconciler(lagging{Client: env.Client, pods: stale}).Reconcile(ctx, req)
	g.Expect(ephemeral(ns, "web-b")()).To(BeEmpty(), "maxPods 2 is already reached by web-a and web-c")
}
