package incident_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/podbuggertest"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// TestACrashStormDoesNotDelayAnotherTenantsLogs: 500 pods of one namespace
// crash at once, their kubelet serving each log in two seconds;
// a pod of another namespace that crashes then has its record and its
// failed instance's log about as soon as when nothing else failed (its
// latency, failure to log written, against the same test's baseline
// without the storm, as a ratio), while the storm's logs still wait. With
// one queue in arrival order the other namespace's read waited behind the
// storm's hundreds, seconds.
func TestACrashStormDoesNotDelayAnotherTenantsLogs(t *testing.T) {
	g := testenv.NewG(t)
	noisy, quiet := env.Namespace(t), env.Namespace(t)
	opts := podbuggertest.Options(env)
	opts.WatchNamespaces = []string{"kube-system"}
	env.StartManager(t, opts)
	runRecorderIn(t, []string{noisy, quiet}, func(ctx context.Context, ns, pod, _ string, _ bool, _ int) (string, bool, error) {
		if ns == noisy {
			select {
			case <-time.After(2 * time.Second):
			case <-ctx.Done():
				return "", false, ctx.Err()
			}
		}
		return "the log of " + pod + "\n", false, nil
	})
	for _, ns := range []string{noisy, quiet} {
		pb := podbuggertest.Recorder(t, env, ns, []debugv1beta1.Trigger{debugv1beta1.TriggerCrashLoopBackOff}, nil)
		// The next test's manager, watching every namespace, must not find
		// these pods' failures under a PodBugger of a namespace going away.
		t.Cleanup(func() {
			g.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, pb))).To(Succeed())
			g.Eventually(env.Exists(pb)).Should(BeFalse())
		})
	}

	const storm, samples = 500, 5
	newPod := func(ns, name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: podbuggertest.Web},
			Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
	}
	noisyPods := make([]*corev1.Pod, storm)
	for i := range noisyPods {
		noisyPods[i] = newPod(noisy, fmt.Sprintf("storm-%d", i))
	}
	quietPods := make([]*corev1.Pod, 2*samples)
	for i := range quietPods {
		quietPods[i] = newPod(quiet, fmt.Sprintf("quiet-%d", i))
		env.Create(t, quietPods[i])
	}
	inParallel(t, noisyPods, func(p *corev1.Pod) error { return env.Client.Create(ctx, p) })
	time.Sleep(time.Second) // the recorder has seen the pods

	// logLatency crashes p and returns how long until its record holds the
	// failed instance's log.
	logLatency := func(p *corev1.Pod) time.Duration {
		t.Helper()
		start := time.Now()
		podbuggertest.Crash(t, env, p, 2, 1, start.Add(-time.Second).Truncate(time.Second), true)
		g.Eventually(func() (string, error) {
			items, err := podbuggertest.IncidentsIn(env, quiet)()
			for _, i := range items {
				if i.Spec.Pod.Name == p.Name {
					return i.Spec.LogTail, err
				}
			}
			return "", err
		}).WithTimeout(30*time.Second).WithPolling(10*time.Millisecond).Should(Equal("the log of "+p.Name+"\n"), p.Name)
		return time.Since(start)
	}
	median := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	alone, stormy := make([]time.Duration, 0, samples), make([]time.Duration, 0, samples)
	for _, p := range quietPods[:samples] {
		alone = append(alone, logLatency(p))
	}

	t0 := time.Now().Add(-time.Second).Truncate(time.Second)
	inParallel(t, noisyPods, func(p *corev1.Pod) error { return podbuggertest.CrashPod(env, p, 2, 1, t0, true) })
	// Every record of the storm is written, most of their logs wait.
	g.Eventually(podbuggertest.IncidentsIn(env, noisy)).WithTimeout(time.Minute).Should(HaveLen(storm))
	for _, p := range quietPods[samples:] {
		stormy = append(stormy, logLatency(p))
	}
	waiting := 0
	items, err := podbuggertest.IncidentsIn(env, noisy)()
	g.Expect(err).NotTo(HaveOccurred())
	for _, i := range items {
		if strings.HasPrefix(i.Spec.LogError, "being read") {
			waiting++
		}
	}
	// Generous: the storm's 500 records and reads load the apiserver the
	// quiet namespace's record goes through too; a read queued behind the
	// storm's waits seconds to minutes.
	ratio := float64(median(stormy)) / float64(max(median(alone), 50*time.Millisecond))
	t.Logf("the quiet namespace's failure to log: alone %v, during the storm %v (%.1fx); %d records of the storm, %d of them without their log yet",
		alone, stormy, ratio, len(items), waiting)
	g.Expect(waiting).To(BeNumerically(">", 0), "the storm's log reads were over before the quiet namespace's failures")
	g.Expect(ratio).To(BeNumerically("<", 10), "the quiet namespace's log latency during the storm against alone")
}

// TestAPodBuggersRecordWritesAreRateLimitedNotLost: 40 pods a PodBugger
// records crash at once, against writes of 120 records a minute (a burst of
// 20): the first 20 records are written at once, the others as the
// PodBugger's bucket allows (not 40 writes of up to 40 KB into etcd at
// once), and none is lost: every pod's failure ends up in its record,
// counted once.
func TestAPodBuggersRecordWritesAreRateLimitedNotLost(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	opts := podbuggertest.Options(env)
	opts.WatchNamespaces = []string{"kube-system"}
	env.StartManager(t, opts)
	const pods, perMinute, burst = 40, 120, 20
	runRecorderWith(t, []string{ns}, func(context.Context, string, string, string, bool, int) (string, bool, error) {
		return "the log\n", false, nil
	}, perMinute, nil)
	pb := podbuggertest.Recorder(t, env, ns, []debugv1beta1.Trigger{debugv1beta1.TriggerCrashLoopBackOff}, nil)
	t.Cleanup(func() {
		g.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, pb))).To(Succeed())
		g.Eventually(env.Exists(pb)).Should(BeFalse())
	})
	ps := make([]*corev1.Pod, pods)
	for i := range ps {
		ps[i] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%d", i), Labels: podbuggertest.Web},
			Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
	}
	inParallel(t, ps, func(p *corev1.Pod) error { return env.Client.Create(ctx, p) })
	time.Sleep(time.Second) // the recorder has seen the pods
	deferredBefore, err := testenv.Metric("deckhand_podbugger_incident_writes_deferred_total", nil)
	g.Expect(err).NotTo(HaveOccurred())

	t0 := time.Now().Add(-time.Second).Truncate(time.Second)
	start := time.Now()
	inParallel(t, ps, func(p *corev1.Pod) error { return podbuggertest.CrashPod(env, p, 2, 1, t0, true) })
	count := func() (int, error) {
		items, err := podbuggertest.IncidentsIn(env, ns)()
		return len(items), err
	}
	// A burst, then two a second: at most 26 in the first three seconds.
	g.Consistently(count).WithTimeout(3*time.Second).Should(BeNumerically("<=", burst+3*perMinute/60), "records written at once")
	g.Eventually(podbuggertest.IncidentsIn(env, ns)).WithTimeout(30 * time.Second).Should(And(HaveLen(pods),
		HaveEach(And(HaveField("Spec.Count", int32(1)), HaveField("Spec.LastFailure.ContainerID", "containerd://instance-2")))))
	deferred, err := testenv.Metric("deckhand_podbugger_incident_writes_deferred_total", nil)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("%d records written in %s at %d a minute (a burst of %d); %g writes deferred", pods, time.Since(start).Round(time.Millisecond),
		perMinute, burst, deferred-deferredBefore)
	g.Expect(deferred - deferredBefore).To(BeNumerically(">=", pods-burst-3*perMinute/60))
}

// inParallel runs do for each of pods, eight at a time.
func inParallel(t *testing.T, pods []*corev1.Pod, do func(*corev1.Pod) error) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	next := make(chan *corev1.Pod)
	for range 8 {
		wg.Go(func() {
			for p := range next {
				if err := do(p); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, p := range pods {
		next <- p
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d pods: %v", len(errs), len(pods), errs[0])
	}
}
