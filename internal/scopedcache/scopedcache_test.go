package scopedcache_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/scopedcache"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// neededLabel marks the ConfigMaps that make their namespace need pods, as
// a PodSet does for the PodSet controller.
const neededLabel = "test.deckhand.dev/needs-pods"

// podsWhereNeeded is a need for pods in the namespaces holding a ConfigMap
// labelled neededLabel.
var podsWhereNeeded = scopedcache.Need{
	Object:   &corev1.Pod{},
	Triggers: []client.Object{&corev1.ConfigMap{}},
	Namespaces: func(ctx context.Context, r client.Reader) ([]string, error) {
		var cms corev1.ConfigMapList
		if err := r.List(ctx, &cms, client.HasLabels{neededLabel}); err != nil {
			return nil, err
		}
		var out []string
		for _, cm := range cms.Items {
			out = append(out, cm.Namespace)
		}
		return out, nil
	},
}

// seen records the pods a handler was told about.
type seen struct {
	mu   sync.Mutex
	keys []string
}

func (s *seen) OnAdd(obj any, _ bool) { s.add(obj) }
func (s *seen) OnUpdate(_, obj any)   { s.add(obj) }
func (s *seen) OnDelete(any)          {}

func (s *seen) add(obj any) {
	if o, ok := obj.(client.Object); ok {
		s.mu.Lock()
		defer s.mu.Unlock()
		if key := o.GetNamespace() + "/" + o.GetName(); !slices.Contains(s.keys, key) {
			s.keys = append(s.keys, key)
		}
	}
}

func (s *seen) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.keys)
}

// startCache starts a scoped cache with podsWhereNeeded and a handler on
// its pod informer, with the index podsByNode, until the test ends.
func startCache(t *testing.T) (*scopedcache.Cache, *seen) {
	t.Helper()
	return startCacheWith(t, env.Config)
}

// startCacheWith is startCache against cfg, with more handlers.
func startCacheWith(t *testing.T, cfg *rest.Config, handlers ...toolscache.ResourceEventHandler) (*scopedcache.Cache, *seen) {
	t.Helper()
	t.Cleanup(scopedcache.SetKeepFor(300 * time.Millisecond))
	c, err := scopedcache.New(podsWhereNeeded)(cfg, cache.Options{Scheme: manager.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	inf, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	s := &seen{}
	for _, h := range append(handlers, s) {
		if h == nil {
			continue
		}
		if _, err := inf.AddEventHandler(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.IndexField(ctx, &corev1.Pod{}, "spec.nodeName", func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("cache stopped with an error: %v", err)
		}
	})
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	return c.(*scopedcache.Cache), s
}

func pod(t *testing.T, ns, name, node string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

func need(t *testing.T, ns string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "need-", Labels: map[string]string{neededLabel: "true"}}}
	if err := env.Client.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	// envtest has no namespace controller: the ConfigMap would outlive the
	// test's namespace and keep it needed in the next test.
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cm) })
	return cm
}

func podNames(c client.Reader, opts ...client.ListOption) func() ([]string, error) {
	return func() ([]string, error) {
		var pods corev1.PodList
		if err := c.List(context.Background(), &pods, opts...); err != nil {
			return nil, err
		}
		var out []string
		for _, p := range pods.Items {
			out = append(out, p.Namespace+"/"+p.Name)
		}
		return out, nil
	}
}

func namespaces(c *scopedcache.Cache) []string {
	ns, _ := c.Namespaces(&corev1.Pod{})
	return ns
}

func TestPodsAreHeldAndToldOnlyWhereNeeded(t *testing.T) {
	g := testenv.NewG(t)
	needed, other := env.Namespace(t), env.Namespace(t)
	need(t, needed)
	pod(t, needed, "p1", "")
	pod(t, other, "q1", "")

	c, s := startCache(t)
	g.Expect(namespaces(c)).To(Equal([]string{needed}))
	g.Eventually(s.Keys).Should(ContainElement(needed + "/p1"))
	pod(t, needed, "p2", "")
	pod(t, other, "q2", "")
	g.Eventually(s.Keys).Should(ContainElement(needed + "/p2"))
	g.Consistently(s.Keys).WithTimeout(time.Second).ShouldNot(ContainElements(other+"/q1", other+"/q2"),
		"a handler was told about pods of a namespace nothing needs")
	g.Expect(podNames(c)()).To(ConsistOf(needed+"/p1", needed+"/p2"),
		"a list across namespaces answers from the needed ones")

	// Needed now: its pods are told and read.
	cm := need(t, other)
	g.Eventually(s.Keys).Should(ContainElements(other+"/q1", other+"/q2"))
	g.Expect(namespaces(c)).To(ConsistOf(needed, other))
	g.Expect(podNames(c, client.InNamespace(other))()).To(ConsistOf(other+"/q1", other+"/q2"))

	// Needed no more: its informer stops after keepFor, and new pods there
	// are not told.
	g.Expect(env.Client.Delete(context.Background(), cm)).To(Succeed())
	g.Eventually(func() []string { return namespaces(c) }).Should(Equal([]string{needed}))
	pod(t, other, "q3", "")
	g.Consistently(s.Keys).WithTimeout(time.Second).ShouldNot(ContainElement(other + "/q3"))
}

func TestAReadWhereNothingIsNeededIsAnsweredAndForgotten(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	pod(t, ns, "a", "node-1")
	pod(t, ns, "b", "node-2")
	c, _ := startCache(t)
	g.Expect(namespaces(c)).To(BeEmpty())

	g.Expect(podNames(c, client.InNamespace(ns))()).To(ConsistOf(ns+"/a", ns+"/b"),
		"a read of a namespace nothing needs must not come back empty")
	got := &corev1.Pod{}
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "b"}, got)).To(Succeed())
	g.Expect(got.Spec.NodeName).To(Equal("node-2"))
	g.Expect(podNames(c, client.InNamespace(ns), client.MatchingFields{"spec.nodeName": "node-1"})()).
		To(Equal([]string{ns + "/a"}), "the index reaches informers started later")
	g.Expect(namespaces(c)).To(Equal([]string{ns}))

	g.Eventually(func() []string { return namespaces(c) }).Should(BeEmpty(),
		"the informer of a namespace read once, and needed by nothing, stays")
}

func TestManyNeededNamespacesShareOneInformer(t *testing.T) {
	g := testenv.NewG(t)
	spaces := make([]string, 0, scopedcache.ClusterWideAbove+1)
	needs := make([]*corev1.ConfigMap, 0, scopedcache.ClusterWideAbove+1)
	for i := range scopedcache.ClusterWideAbove + 1 {
		ns := env.Namespace(t)
		spaces = append(spaces, ns)
		needs = append(needs, need(t, ns))
		pod(t, ns, fmt.Sprintf("p%d", i), "")
	}
	c, s := startCache(t)
	g.Eventually(func() bool { _, all := c.Namespaces(&corev1.Pod{}); return all }).Should(BeTrue())
	g.Eventually(func() []string { return namespaces(c) }).Should(BeEmpty(),
		"the per-namespace informers outlive the switch by keepFor only")
	// The handler's initial Adds follow the informer's sync (a controller
	// waits for its registration, not for the cache).
	g.Eventually(s.Keys).Should(ContainElement(spaces[0] + "/p0"))
	g.Expect(podNames(c, client.InNamespace(spaces[3]))()).To(Equal([]string{spaces[3] + "/p3"}))

	// Back under the limit: one informer per namespace again.
	for _, cm := range needs[1:] {
		g.Expect(env.Client.Delete(context.Background(), cm)).To(Succeed())
	}
	g.Eventually(func() []string { return namespaces(c) }).Should(Equal([]string{spaces[0]}))
	g.Eventually(func() bool { _, all := c.Namespaces(&corev1.Pod{}); return all }).Should(BeFalse())
	pod(t, spaces[0], "late", "")
	g.Eventually(s.Keys).Should(ContainElement(spaces[0] + "/late"))
}

// The handler interface the tests' recorder implements.
var _ toolscache.ResourceEventHandler = &seen{}
