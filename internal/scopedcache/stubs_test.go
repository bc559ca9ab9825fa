package scopedcache_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/scopedcache"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// told records the last object a handler was told of, by key.
type told struct {
	mu   sync.Mutex
	objs map[string]*corev1.Pod
}

func (t *told) OnAdd(obj any, _ bool) { t.add(obj) }
func (t *told) OnUpdate(_, obj any)   { t.add(obj) }
func (t *told) OnDelete(any)          {}

func (t *told) add(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.objs[p.Namespace+"/"+p.Name] = p
}

func (t *told) get(key string) func() *corev1.Pod {
	return func() *corev1.Pod {
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.objs[key]
	}
}

// Held cluster-wide, the pods of a namespace nothing needs are kept as
// stubs (metadata only: they cost the manager little more than their
// names) and no handler is told of them, yet every read is answered whole: a read in that namespace from
// an informer of its own, and once the namespace is needed, its pods are
// held whole again, in reads across namespaces too. Issue 26: above 16
// namespaces the cluster-wide informer held every pod of the cluster.
func TestClusterWideHoldsStubsOfWhatNothingNeeds(t *testing.T) {
	g := testenv.NewG(t)
	n := scopedcache.ClusterWideAbove + 1
	spaces := make([]string, 0, n)
	for i := range n {
		ns := env.Namespace(t)
		spaces = append(spaces, ns)
		need(t, ns)
		pod(t, ns, fmt.Sprintf("p%d", i), "")
	}
	other := env.Namespace(t)
	pod(t, other, "unrelated", "node-a")
	key := other + "/unrelated"

	h, l := &told{objs: map[string]*corev1.Pod{}}, newLedger()
	c, _ := startCacheWith(t, env.Config, h, l)
	g.Eventually(clusterWide(c)).Should(BeTrue())

	// What the cluster-wide informer holds of it is a stub, and the
	// handlers are not told of it; a needed namespace's pods are held and
	// told whole.
	g.Eventually(func() bool {
		held, _ := scopedcache.ClusterWideHolds(c, &corev1.Pod{}, other, "unrelated")
		return scopedcache.IsStub(held)
	}).
		Should(BeTrue(), "the unrelated pod is held whole")
	held, _ := scopedcache.ClusterWideHolds(c, &corev1.Pod{}, spaces[0], "p0")
	g.Expect(held).To(BeAssignableToTypeOf(&corev1.Pod{}))
	g.Eventually(h.get(spaces[0] + "/p0")).ShouldNot(BeNil())
	g.Expect(h.get(spaces[0] + "/p0")().Spec.Containers).To(HaveLen(1))
	g.Expect(h.get(key)()).To(BeNil(), "a handler was told of a pod nothing needs")

	// A read in the namespace is answered whole.
	got := &corev1.Pod{}
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: other, Name: "unrelated"}, got)).To(Succeed())
	g.Expect(got.Spec.NodeName).To(Equal("node-a"))
	var byNode corev1.PodList
	g.Expect(c.List(context.Background(), &byNode, client.InNamespace(other), client.MatchingFields{"spec.nodeName": "node-a"})).To(Succeed())
	g.Expect(byNode.Items).To(HaveLen(1))

	// Needed now: held whole, told whole, and listed across namespaces
	// once, whole.
	need(t, other)
	g.Eventually(func() []string { return namespaces(c) }).Should(ContainElement(other))
	pod(t, other, "later", "node-b")
	g.Eventually(h.get(other + "/later")).ShouldNot(BeNil())
	g.Expect(h.get(other + "/later")().Spec.NodeName).To(Equal("node-b"))
	g.Eventually(func() ([]string, error) {
		var all corev1.PodList
		if err := c.List(context.Background(), &all); err != nil {
			return nil, err
		}
		var out []string
		for _, p := range all.Items {
			if p.Namespace == other {
				if len(p.Spec.Containers) == 0 {
					return nil, fmt.Errorf("a stub in a list: %s", p.Name)
				}
				out = append(out, p.Name+"@"+p.Spec.NodeName)
			}
		}
		return out, nil
	}).Should(ConsistOf("unrelated@node-a", "later@node-b"))
	g.Expect(clusterWide(c)()).To(BeTrue())
	// Told whole once it is needed, and each pod's history once.
	g.Eventually(h.get(key)).ShouldNot(BeNil())
	g.Expect(h.get(key)().Spec.NodeName).To(Equal("node-a"))
	g.Expect(l.Violations()).To(BeEmpty())
}
