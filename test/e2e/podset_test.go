//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// podWatch follows a PodSet's pods through a watch and remembers the
// extremes: the most pods alive at once, the fewest ready, and every pod
// that ever existed. Alive is neither finished nor being deleted.
type podWatch struct {
	ns, selector string

	mu       sync.Mutex
	pods     map[string]*corev1.Pod
	seen     map[string]bool
	maxAlive int
	minReady int
	broken   error // the watch failed: the extremes are not to be trusted
}

func watchPods(t *testing.T, ns, set string) *podWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pods := c.Clientset.CoreV1().Pods(ns)
	selector := appsv1beta1.PodSetLabel + "=" + set
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("listing pods: %v", err)
	}
	// A plain watch can be closed by the apiserver at any time; the
	// RetryWatcher resumes it from the last event, so no state is missed.
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return pods.Watch(ctx, o)
		},
	})
	if err != nil {
		t.Fatalf("watching pods: %v", err)
	}
	pw := &podWatch{ns: ns, selector: selector, pods: map[string]*corev1.Pod{}, seen: map[string]bool{}}
	for i := range list.Items {
		pw.pods[list.Items[i].Name] = &list.Items[i]
		pw.seen[list.Items[i].Name] = true
	}
	go func() {
		for ev := range w.ResultChan() {
			pw.mu.Lock()
			switch p, ok := ev.Object.(*corev1.Pod); {
			case ev.Type == watch.Error || !ok:
				pw.broken = fmt.Errorf("watch failed: %v", ev.Object)
			case ev.Type == watch.Deleted:
				delete(pw.pods, p.Name)
			case ev.Type == watch.Added || ev.Type == watch.Modified:
				pw.pods[p.Name] = p
				pw.seen[p.Name] = true
			}
			alive, ready := pw.countLocked()
			pw.maxAlive = max(pw.maxAlive, alive)
			pw.minReady = min(pw.minReady, ready)
			pw.mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return pw
}

func (w *podWatch) countLocked() (alive, ready int) {
	for _, p := range w.pods {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		alive++
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return alive, ready
}

// reset starts new extremes from the present.
func (w *podWatch) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.maxAlive, w.minReady = w.countLocked()
}

// extremes returns the most pods alive and fewest ready since reset, and how
// many pods ever existed, once the watch has caught up with the apiserver.
// It fails the test if the watch broke.
func (w *podWatch) extremes(t *testing.T) (maxAlive, minReady, seen int) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		list, err := c.Clientset.CoreV1().Pods(w.ns).List(context.Background(), metav1.ListOptions{LabelSelector: w.selector})
		g.Expect(err).NotTo(HaveOccurred())
		now := map[string]string{}
		for _, p := range list.Items {
			now[p.Name] = p.ResourceVersion
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		watched := map[string]string{}
		for name, p := range w.pods {
			watched[name] = p.ResourceVersion
		}
		g.Expect(watched).To(Equal(now), "the watch has not caught up")
	}).WithTimeout(time.Minute).Should(Succeed())
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken != nil {
		t.Fatal(w.broken)
	}
	return w.maxAlive, w.minReady, len(w.seen)
}

func getPodSet(g Gomega, ns, name string) *appsv1beta1.PodSet {
	set := &appsv1beta1.PodSet{}
	g.Expect(c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, set)).To(Succeed())
	return set
}

// converged waits until the PodSet has size pods, all Running, Ready, on a
// kwok node, made from the current template and named in status.podNames, and
// reports Available.
func converged(t *testing.T, ns, name string, size int, image string) {
	t.Helper()
	nodes := &corev1.NodeList{}
	NewWithT(t).Expect(c.Client.List(context.Background(), nodes)).To(Succeed())
	nodeNames := make([]string, 0, len(nodes.Items))
	for _, n := range nodes.Items {
		nodeNames = append(nodeNames, n.Name)
	}
	NewWithT(t).Eventually(func(g Gomega) {
		set := getPodSet(g, ns, name)
		pods := &corev1.PodList{}
		g.Expect(c.Client.List(context.Background(), pods, client.InNamespace(ns),
			client.MatchingLabels{appsv1beta1.PodSetLabel: name})).To(Succeed())
		var alive []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			alive = append(alive, p.Name)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), p.Name)
			g.Expect(p.Spec.NodeName).To(BeElementOf(nodeNames), p.Name)
			g.Expect(p.Spec.Containers[0].Image).To(Equal(image), p.Name)
			g.Expect(p.Status.Conditions).To(ContainElement(And(HaveField("Type", corev1.PodReady),
				HaveField("Status", corev1.ConditionTrue))), p.Name)
		}
		slices.Sort(alive)
		g.Expect(alive).To(HaveLen(size))
		g.Expect(set.Status.PodNames).To(Equal(alive))
		g.Expect(set.Status.ReadyReplicas).To(BeEquivalentTo(size))
		g.Expect(set.Status.UpdatedReplicas).To(BeEquivalentTo(size))
		g.Expect(set.Status.ObservedGeneration).To(Equal(set.Generation))
		g.Expect(meta.IsStatusConditionTrue(set.Status.Conditions, appsv1beta1.ConditionAvailable)).To(BeTrue())
		g.Expect(meta.IsStatusConditionFalse(set.Status.Conditions, appsv1beta1.ConditionProgressing)).To(BeTrue())
	}).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
}

func TestPodSetOnTheCluster(t *testing.T) {
	g := NewWithT(t)
	ns := c.Namespace(t, nil)
	c.RunManager(t, "--controllers", "podset")
	root, err := testenv.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	const name = "podset-sample"
	pods := watchPods(t, ns, name)

	// The seed's PodSet: three busybox pods, named in status.podNames.
	g.Expect(c.Kubectl("apply", "-n", ns, "-f", filepath.Join(root, "config", "samples", "apps_v1beta1_podset.yaml"))).
		Error().NotTo(HaveOccurred())
	converged(t, ns, name, 3, "busybox")
	g.Expect(c.Kubectl("get", "podset", name, "-n", ns)).To(MatchRegexp(`podset-sample\s+3\s+3\s+3\s+`))
	g.Expect(c.Kubectl("get", "deckhand", "-n", ns, "-o", "name")).To(ContainSubstring("podset.apps.deckhand.dev/" + name))

	// kubectl scale goes through the scale subresource. Up to 10 creates
	// exactly 7 pods; down to 2 creates none; at no moment do more than 10
	// exist.
	g.Expect(c.Kubectl("scale", "-n", ns, "podset/"+name, "--replicas=10")).Error().NotTo(HaveOccurred())
	converged(t, ns, name, 10, "busybox")
	g.Expect(c.Kubectl("scale", "-n", ns, "podset/"+name, "--replicas=2")).Error().NotTo(HaveOccurred())
	converged(t, ns, name, 2, "busybox")
	maxAlive, _, seen := pods.extremes(t)
	g.Expect(maxAlive).To(Equal(10), "pods alive at once")
	g.Expect(seen).To(Equal(10), "pods ever created")

	// A pod deleted by hand is replaced.
	victim := getPodSet(g, ns, name).Status.PodNames[0]
	g.Expect(c.Kubectl("delete", "pod", "-n", ns, victim, "--wait=false")).Error().NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) []string { return getPodSet(g, ns, name).Status.PodNames }).
		WithTimeout(time.Minute).Should(SatisfyAll(HaveLen(2), Not(ContainElement(victim))))
	converged(t, ns, name, 2, "busybox")
	_, _, seen = pods.extremes(t)
	g.Expect(seen).To(Equal(11), "pods ever created")

	// Template changes roll out with at most maxUnavailable (1) of the 4
	// pods unready, and never more than 4 pods.
	g.Expect(c.Kubectl("scale", "-n", ns, "podset/"+name, "--replicas=4")).Error().NotTo(HaveOccurred())
	converged(t, ns, name, 4, "busybox")
	for _, image := range []string{"busybox:1.36", "busybox:1.37"} {
		pods.reset()
		patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"labels":{"app":"sleep"}},"spec":{"containers":[{"name":"busybox","image":%q,"command":["sleep","3600"]}]}}}}`, image)
		g.Expect(c.Kubectl("patch", "-n", ns, "podset/"+name, "--type=merge", "-p", patch)).Error().NotTo(HaveOccurred())
		converged(t, ns, name, 4, image)
		maxAlive, minReady, _ := pods.extremes(t)
		g.Expect(maxAlive).To(Equal(4), "pods alive at once during the rollout to %s", image)
		g.Expect(minReady).To(Equal(3), "fewest ready pods during the rollout to %s", image)
	}
}

func TestPodSetRefusesInvalidSpecsNamingTheField(t *testing.T) {
	ns := c.Namespace(t, nil)
	for name, tc := range map[string]struct{ manifest, want string }{
		"negative size": {
			manifest: `{"apiVersion":"apps.deckhand.dev/v1alpha1","kind":"PodSet","metadata":{"name":"neg"},"spec":{"size":-1}}`,
			want:     "spec.size: Invalid value: -1: spec.size in body should be greater than or equal to 0",
		},
		"negative replicas (v1beta1)": {
			manifest: `{"apiVersion":"apps.deckhand.dev/v1beta1","kind":"PodSet","metadata":{"name":"neg"},"spec":{"replicas":-1}}`,
			want:     "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0",
		},
		"template without containers": {
			manifest: `{"apiVersion":"apps.deckhand.dev/v1alpha1","kind":"PodSet","metadata":{"name":"empty"},"spec":{"size":1,"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[]}}}}`,
			want:     "spec.template.spec.containers: Invalid value: must have at least one container",
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			file := filepath.Join(t.TempDir(), "podset.json")
			g.Expect(os.WriteFile(file, []byte(tc.manifest), 0o600)).To(Succeed())
			_, err := c.Kubectl("create", "-n", ns, "-f", file)
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}
