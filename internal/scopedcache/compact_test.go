package scopedcache_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/scopedcache"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// compactPod is a pod held compact: its metadata and node.
type compactPod struct {
	metav1.ObjectMeta
	node string
}

func (c *compactPod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (c *compactPod) DeepCopyObject() runtime.Object {
	out := &compactPod{node: c.node}
	c.DeepCopyInto(&out.ObjectMeta)
	return out
}

func compactPods(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	c := &compactPod{node: p.Spec.NodeName}
	p.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return c, nil
}

func expandPod(held client.Object) (client.Object, bool) {
	c, ok := held.(*compactPod)
	if !ok {
		return held, false
	}
	p := &corev1.Pod{Spec: corev1.PodSpec{NodeName: c.node}}
	c.DeepCopyInto(&p.ObjectMeta)
	return p, true
}

// A kind held compact (Need.Expand) reads, indexes and tells as the kind,
// per namespace and cluster-wide (issue 26: Jobs are held as a type smaller
// than batchv1.Job). The cluster-wide space once held nothing a reader
// could see: its informer's store was never found.
func TestACompactKindReadsAsTheKind(t *testing.T) {
	g := testenv.NewG(t)
	t.Cleanup(scopedcache.SetKeepFor(300 * time.Millisecond))
	n := scopedcache.ClusterWideAbove + 1
	spaces := make([]string, 0, n)
	for range n {
		spaces = append(spaces, env.Namespace(t))
	}
	need(t, spaces[0])
	pod(t, spaces[0], "a", "node-a")

	compact := podsWhereNeeded
	compact.Expand = expandPod
	c, err := scopedcache.New(compact)(env.Config, cache.Options{Scheme: manager.Scheme,
		ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Transform: compactPods}}})
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	inf, err := c.GetInformer(ctx, &corev1.Pod{})
	g.Expect(err).NotTo(HaveOccurred())
	h := &told{objs: map[string]*corev1.Pod{}}
	_, err = inf.AddEventHandler(h)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.IndexField(ctx, &corev1.Pod{}, "spec.nodeName", func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	})).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("cache stopped with an error: %v", err)
		}
	})
	g.Expect(c.WaitForCacheSync(ctx)).To(BeTrue())
	sc := c.(*scopedcache.Cache)

	reads := func(ns, name, node string) {
		t.Helper()
		g.Eventually(h.get(ns+"/"+name)).ShouldNot(BeNil(), "the handler was not told of %s/%s", ns, name)
		g.Expect(h.get(ns + "/" + name)().Spec.NodeName).To(Equal(node))
		got := &corev1.Pod{}
		g.Eventually(func() error { return sc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, got) }).Should(Succeed())
		g.Expect(got.Spec.NodeName).To(Equal(node))
		g.Expect(got.GroupVersionKind().Kind).To(Equal("Pod"))
		var byNode corev1.PodList
		g.Expect(sc.List(ctx, &byNode, client.InNamespace(ns), client.MatchingFields{"spec.nodeName": node})).To(Succeed())
		g.Expect(byNode.Items).To(HaveLen(1))
		g.Expect(podNames(sc)()).To(ContainElement(ns + "/" + name))
	}
	reads(spaces[0], "a", "node-a")

	// Cluster-wide: every namespace needed.
	for i, ns := range spaces[1:] {
		need(t, ns)
		pod(t, ns, fmt.Sprintf("p%d", i), "node-b")
	}
	g.Eventually(clusterWide(sc)).Should(BeTrue())
	pod(t, spaces[0], "later", "node-c")
	reads(spaces[0], "later", "node-c")
	reads(spaces[n-1], fmt.Sprintf("p%d", n-2), "node-b")
}
