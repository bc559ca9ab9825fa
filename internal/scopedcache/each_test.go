package scopedcache_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/scopedcache"
)

// Each hands out a compact kind one expanded object at a time, in a
// namespace and across the needed ones: a pass over 100,000 Jobs that
// listed them first held 100,000 expanded Jobs at once (issue 26; the
// manager's RSS went to 841 MiB at its start). Seen failing with Each as
// List and a loop: every object was expanded before fn saw the first.
func TestEachExpandsOneObjectAtATime(t *testing.T) {
	g := NewWithT(t)
	a, b := env.Namespace(t), env.Namespace(t)
	for _, ns := range []string{a, b} {
		need(t, ns)
		for i := range 5 {
			pod(t, ns, fmt.Sprintf("p%d", i), "node")
		}
	}
	var expanded atomic.Int64
	compact := podsWhereNeeded
	compact.Expand = func(held client.Object) (client.Object, bool) {
		expanded.Add(1)
		return expandPod(held)
	}
	c, err := scopedcache.New(compact)(env.Config, cache.Options{Scheme: manager.Scheme,
		ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Transform: compactPods}}})
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		g.Expect(<-done).To(Succeed())
	})
	g.Expect(c.WaitForCacheSync(ctx)).To(BeTrue())
	sc := c.(*scopedcache.Cache)
	g.Eventually(func() (int, error) {
		var pods corev1.PodList
		err := sc.List(ctx, &pods)
		return len(pods.Items), err
	}).Should(Equal(10))

	for _, opts := range [][]client.ListOption{{client.InNamespace(a)}, nil} {
		before, seen := expanded.Load(), int64(0)
		g.Expect(scopedcache.Each(ctx, sc, &corev1.PodList{}, func(o client.Object) error {
			seen++
			if got := expanded.Load() - before; got != seen {
				return fmt.Errorf("%d objects expanded when object %d was handed out", got, seen)
			}
			if _, ok := o.(*corev1.Pod); !ok {
				return fmt.Errorf("handed out a %T", o)
			}
			return nil
		}, opts...)).To(Succeed(), "options %v", opts)
		g.Expect(seen).To(BeNumerically(">=", 5), "options %v", opts)
	}

	// fn's error stops the pass.
	calls := 0
	stop := fmt.Errorf("stop")
	g.Expect(scopedcache.Each(ctx, sc, &corev1.PodList{}, func(client.Object) error { calls++; return stop }, client.InNamespace(b))).To(MatchError(stop))
	g.Expect(calls).To(Equal(1))
}
