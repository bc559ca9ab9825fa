package podbugger_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	podbuggercontroller "github.com/deckhand-dev/deckhand/internal/controller/podbugger"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/podbuggertest"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// staleGets answers a Get of the PodBugger with the copy it holds: a cache
// that has not seen the PodBugger's last change.
type staleGets struct {
	client.Client
	pb *debugv1beta1.PodBugger
}

func (c staleGets) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if pb, ok := obj.(*debugv1beta1.PodBugger); ok && key == client.ObjectKeyFromObject(c.pb) {
		c.pb.DeepCopyInto(pb)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// The plan follows the cached PodBugger; an ephemeral container can never be
// removed, so before adding one the PodBugger is read afresh: after its
// owner suspended, narrowed or deleted it, a cache that has not caught up
// must not inject on its old word.
func TestNoInjectionForAPodBuggerThatChangedSinceTheCacheSawIt(t *testing.T) {
	opts := podbuggertest.Options(env)
	// The manager serves the webhook (so the PodBugger can be created) but
	// watches another namespace: this test drives Reconcile itself.
	opts.WatchNamespaces = []string{"kube-system"}
	env.StartManager(t, opts)
	p, err := policy.From(opts.Options)
	if err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(g Gomega, pb *debugv1beta1.PodBugger){
		"suspended": func(g Gomega, pb *debugv1beta1.PodBugger) {
			g.Expect(env.Update(pb, func() { pb.Spec.Suspend = true })).To(Succeed())
		},
		"selector narrowed": func(g Gomega, pb *debugv1beta1.PodBugger) {
			g.Expect(env.Update(pb, func() { pb.Spec.Selector.MatchLabels = map[string]string{"app": "none"} })).To(Succeed())
		},
		"deleted": func(g Gomega, pb *debugv1beta1.PodBugger) {
			g.Expect(env.Client.Delete(ctx, pb)).To(Succeed())
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := testenv.NewG(t)
			ns := podbuggertest.EnabledNamespace(t, env)
			pod(t, ns, "web-a", podbuggertest.Web, true)
			pb := podbuggertest.PodBugger(ns, "web-debug", podbuggertest.Web)
			g.Expect(env.Client.Create(ctx, pb)).To(Succeed())
			cached := pb.DeepCopy()
			change(g, pb)

			r := podbuggercontroller.NewPodBuggerReconciler(staleGets{env.Client, cached}, env.Client, events.NewFakeRecorder(100), p)
			_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(cached)})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(podbuggertest.Ephemeral(env, ns, "web-a")()).To(BeEmpty(), "injected for a PodBugger its owner had changed")
		})
	}
}
