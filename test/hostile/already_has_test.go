package hostile_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/sync/errgroup"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// alreadyHas is how many objects a tenant already has in the rows below:
// HOSTILE_ALREADY_HAS, 2,000 by default so that make test stays bounded
// (make test-faults runs 20,000).
func alreadyHas(t *testing.T) int {
	if s := os.Getenv("HOSTILE_ALREADY_HAS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("HOSTILE_ALREADY_HAS=%q: %v", s, err)
		}
		return n
	}
	return 2_000
}

// createMany creates n objects made by make, 32 at a time.
func createMany(t *testing.T, n int, make func(i int) client.Object, then func(client.Object) error) {
	t.Helper()
	var g errgroup.Group
	g.SetLimit(32)
	for i := range n {
		g.Go(func() error {
			obj := make(i)
			if err := env.Client.Create(context.Background(), obj); err != nil {
				return fmt.Errorf("creating %s: %w", obj.GetName(), err)
			}
			if then != nil {
				return then(obj)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// What a tenant already has costs the manager no more than what it writes:
// a new JobWatcher with a history limit over a namespace's N finished
// Jobs of 3 KB, and a PodSet that makes a namespace of N pods one the
// manager caches, then that namespace moved into the cluster-wide informer
// and handed back to its own, stay under the manager's memory limit, and
// another tenant's expired Jobs keep going meanwhile.
func TestWhatATenantAlreadyHasIsBounded(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	n := alreadyHas(t)
	history, pods, quiet := env.Namespace(t), env.Namespace(t), env.Namespace(t)

	padding := strings.Repeat("x", 3<<10)
	start := time.Now()
	createMany(t, n, func(i int) client.Object {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: history, Name: fmt.Sprintf("old-%05d", i), Annotations: map[string]string{"padding": padding}},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}}}
	}, func(obj client.Object) error {
		job := obj.(*batchv1.Job)
		testenv.FinishJob(job, batchv1.JobComplete, start.Add(-time.Hour))
		return env.Client.Status().Update(ctx, job)
	})
	createMany(t, n, func(i int) client.Object {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pods, Name: fmt.Sprintf("app-%05d", i), Labels: map[string]string{"app": "already-there"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}
	}, nil)
	t.Logf("%d finished Jobs and %d pods created in %s", n, n, time.Since(start).Round(time.Second))

	p := startManager(t)
	g.Expect(env.Client.Create(ctx, &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: quiet, Name: "quiet"},
		Spec: deckhandbatchv1.JobWatcherSpec{JobPolicy: deckhandbatchv1.JobPolicy{TTLSecondsAfterSucceeded: ptr.To[int32](0)}}})).To(Succeed())
	// The owner means the cleanup: its breaker allows the whole backlog
	// in a minute (at the default 1,000 it would hold the rest, as meant).
	g.Expect(env.Client.Create(ctx, &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: history, Name: "keep-ten"},
		Spec: deckhandbatchv1.JobWatcherSpec{JobPolicy: deckhandbatchv1.JobPolicy{SuccessfulJobsHistoryLimit: ptr.To[int32](10),
			MaxDeletionsPerMinute: ptr.To[int32](100_000)}}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: pods, Name: "newcomer"},
		Spec: appsv1beta1.PodSetSpec{Replicas: 1, Template: template("newcomer")}})).To(Succeed())

	// While the history drains, another tenant's expired Jobs go as usual,
	// one every half second (well under the breaker's 1,000 a minute).
	for i := 0; ; i++ {
		time.Sleep(500 * time.Millisecond)
		var left batchv1.JobList
		g.Expect(env.Client.List(ctx, &left, client.InNamespace(history), client.Limit(20))).To(Succeed())
		if len(left.Items) <= 10 && left.Continue == "" {
			break
		}
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: quiet, Name: fmt.Sprintf("quick-%d", i)},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}}}
		g.Expect(env.Client.Create(ctx, job)).To(Succeed())
		testenv.FinishJob(job, batchv1.JobComplete, time.Now())
		g.Expect(env.Client.Status().Update(ctx, job)).To(Succeed())
		g.Eventually(env.Exists(job)).WithTimeout(time.Minute).Should(BeFalse(), "another tenant's expired Job stayed while the history drained")
		g.Expect(p.exited()).To(BeFalse(), "the manager exited")
		rss, err := p.peakRSS()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rss).To(BeNumerically("<", shippedLimit), "peak RSS %d MiB", rss>>20)
		if time.Since(start) > 20*time.Minute {
			t.Fatalf("the history of %d Jobs did not drain to its limit", n)
		}
	}
	g.Eventually(func() (int32, error) {
		set := &appsv1beta1.PodSet{}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: pods, Name: "newcomer"}, set)
		return set.Status.Replicas, err
	}).WithTimeout(time.Minute).Should(Equal(int32(1)), "the PodSet in the namespace of %d pods", n)

	// The namespace of 20,000 pods crosses between the cache's spaces: 17
	// namespaces needing pods move every pod into one cluster-wide
	// informer, and back at 12 each namespace has its own again, this one
	// handed over with all its pods.
	others := make([]client.Object, 0, 16)
	for i := range 16 {
		set := &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace(t), Name: fmt.Sprintf("other-%d", i)},
			Spec: appsv1beta1.PodSetSpec{Replicas: 1, Template: template("other")}}
		g.Expect(env.Client.Create(ctx, set)).To(Succeed())
		others = append(others, set)
	}
	settled := func(want int32) {
		g.Eventually(func() (int32, error) {
			set := &appsv1beta1.PodSet{}
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: pods, Name: "newcomer"}, set)
			return set.Status.Replicas, err
		}).WithTimeout(2*time.Minute).Should(Equal(want), "the PodSet in the namespace of %d pods", n)
	}
	settled(1)
	for _, set := range others[:5] {
		g.Expect(env.Client.Delete(ctx, set)).To(Succeed())
	}
	// Scaled after the handover, the PodSet acts on the handed-over cache.
	set := &appsv1beta1.PodSet{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: pods, Name: "newcomer"}, set)).To(Succeed())
	set.Spec.Replicas = 2
	g.Expect(env.Client.Update(ctx, set)).To(Succeed())
	settled(2)
	g.Expect(p.exited()).To(BeFalse(), "the manager exited")
	rss, err := p.peakRSS()
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("peak RSS %d MiB (limit %d MiB) after a history of %d Jobs drained and a namespace of %d pods was taken on and handed over", rss>>20, shippedLimit>>20, n, n)
	g.Expect(rss).To(BeNumerically("<", shippedLimit))
}
