package podset_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	podsetcontroller "github.com/deckhand-dev/deckhand/internal/controller/podset"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// slowCreates delays every pod creation (an apiserver under load) and
// records the most in flight at once.
type slowCreates struct {
	client.Client
	inflight, peak atomic.Int64
	mu             sync.Mutex
}

func (c *slowCreates) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, ok := obj.(*corev1.Pod); ok {
		n := c.inflight.Add(1)
		defer c.inflight.Add(-1)
		c.mu.Lock()
		if n > c.peak.Load() {
			c.peak.Store(n)
		}
		c.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
	return c.Client.Create(ctx, obj, opts...)
}

// A namespace editor's huge template costs the manager its size times the
// creations in flight: with a 512 KiB template, one sync keeps at most 32
// creations (16 MiB of template) in flight, not the hundreds a small one
// ramps up to.
func TestAHugeTemplateHasFewerCreationsInFlight(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	set := newPodSet(env.Namespace(t), "huge", 120)
	set.Spec.Template = &corev1.PodTemplateSpec{}
	set.Spec.Template.Labels = map[string]string{"app": "huge"}
	set.Spec.Template.Annotations = map[string]string{"example.com/ballast": strings.Repeat("x", 200<<10)}
	set.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Image: "busybox:1",
		Env: []corev1.EnvVar{{Name: "BALLAST", Value: strings.Repeat("y", 312<<10)}}}}
	env.Create(t, set)

	c := &slowCreates{Client: withoutIndexes{env.Client}}
	r := podsetcontroller.NewPodSetReconciler(c, withoutIndexes{env.Client}, &events.FakeRecorder{})
	_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(set)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(podsOf(g, set)).To(HaveLen(120))
	g.Expect(c.peak.Load()).To(BeNumerically("<=", 32), "creations of a 512 KiB template in flight at once")
	g.Expect(c.peak.Load()).To(BeNumerically(">", 8), "the slow start still ramps up")
}

// The workers' creations in flight share one budget: several PodSets
// scaling up at once, each with a 64 KiB template, keep no more in flight
// together than the budget holds (16 of them in 1 MiB), where each sync's
// own bound (256 of that template) would let each ramp up on its own.
func TestCreationsInFlightShareOneBudgetAcrossWorkers(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c := &slowCreates{Client: withoutIndexes{env.Client}}
	r := podsetcontroller.NewPodSetReconciler(c, withoutIndexes{env.Client}, &events.FakeRecorder{})
	r.LimitCreationsTo(1 << 20)
	sets := make([]*appsv1beta1.PodSet, 3)
	for i := range sets {
		sets[i] = newPodSet(ns, fmt.Sprintf("budget-%d", i), 60)
		sets[i].Spec.Template = &corev1.PodTemplateSpec{}
		sets[i].Spec.Template.Labels = map[string]string{"app": sets[i].Name}
		sets[i].Spec.Template.Annotations = map[string]string{"example.com/ballast": strings.Repeat("x", 64<<10)}
		sets[i].Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Image: "busybox:1"}}
		env.Create(t, sets[i])
	}
	var wg sync.WaitGroup
	for _, set := range sets { // as three workers would
		wg.Go(func() {
			_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(set)})
			g.Expect(err).NotTo(HaveOccurred())
		})
	}
	wg.Wait()
	for _, set := range sets {
		g.Expect(podsOf(g, set)).To(HaveLen(60))
	}
	g.Expect(c.peak.Load()).To(BeNumerically("<=", 16), "creations of a 64 KiB template in flight at once, over all PodSets")
	g.Expect(c.peak.Load()).To(BeNumerically(">", 8), "the PodSets still ramp up to the budget")
}
