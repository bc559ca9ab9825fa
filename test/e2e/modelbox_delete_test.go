//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	modelboxcontroller "github.com/deckhand-dev/deckhand/internal/controller/modelbox"
)

// Deleting a ModelBox removes its children, their ReplicaSets and pods
// through the garbage collector, and nothing else: not the children of a
// ModelBox of the same name in another namespace, not a Deployment the
// user made with the ModelBox's labels, not a Service the user made with
// the ModelBox's name (which this ModelBox, without ports, does not want).
// A watch of every kind involved checks each deletion and change as it
// happens, not only the end state.
func TestModelBoxDeletionRemovesItsChildrenAndNothingElse(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	here, there := c.Namespace(t, nil), c.Namespace(t, nil)
	c.RunManager(t, "--controllers", "modelbox")

	labels := map[string]string{modelboxcontroller.LabelModelBox: "model"}
	lookalike := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: here, Name: "lookalike", Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "lookalike"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "lookalike", modelboxcontroller.LabelModelBox: "model"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "nginx:1.28.0"}}}}}}
	sameName := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: here, Name: "model", Labels: labels},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "lookalike"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	g.Expect(c.Client.Create(ctx, lookalike)).To(Succeed())
	g.Expect(c.Client.Create(ctx, sameName)).To(Succeed())

	newBox := func(ns string, ports []modelv1.ServicePort) *modelv1.ModelBox {
		return &modelv1.ModelBox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "model"},
			Spec: modelv1.ModelBoxSpec{Image: "nginx:1.28.0", Replicas: ptr.To[int32](2), Ports: ports}}
	}
	doomed, kept := newBox(here, nil), newBox(there, []modelv1.ServicePort{{Port: 80}})
	g.Expect(c.Client.Create(ctx, doomed)).To(Succeed())
	g.Expect(c.Client.Create(ctx, kept)).To(Succeed())
	// Here the ModelBox's 2 pods and the look-alike's; there the other's 2.
	g.Eventually(runningPods(ctx, here, "nginx:1.28.0")).WithTimeout(modelBoxWait).Should(HaveLen(3))
	g.Eventually(runningPods(ctx, there, "nginx:1.28.0")).WithTimeout(modelBoxWait).Should(HaveLen(2))
	g.Eventually(func() error {
		return c.Client.Get(ctx, client.ObjectKey{Namespace: here, Name: "model"}, &appsv1.Deployment{})
	}).WithTimeout(modelBoxWait).Should(Succeed())
	g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(sameName), sameName)).To(Succeed())
	g.Expect(sameName.OwnerReferences).To(BeEmpty(), "the ModelBox took over the user's Service")

	w := watchDeletions(t, []string{here, there}, doomed.UID)
	g.Expect(c.Kubectl("delete", "modelbox", "-n", here, "model")).To(ContainSubstring("deleted"))

	// Its Deployment, budget, ReplicaSet and pods go.
	g.Eventually(func() []string { return w.left() }).WithTimeout(modelBoxWait).Should(BeEmpty())
	g.Eventually(runningPods(ctx, here, "nginx:1.28.0")).WithTimeout(modelBoxWait).Should(HaveLen(1))
	g.Expect(w.violations()).To(BeEmpty())

	// What it did not own is all there, untouched.
	for _, obj := range []client.Object{lookalike, sameName, kept,
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: there, Name: "model"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: there, Name: "model"}}} {
		g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed(), "%T %s", obj, client.ObjectKeyFromObject(obj))
		g.Expect(obj.GetDeletionTimestamp()).To(BeNil(), "%T %s", obj, client.ObjectKeyFromObject(obj))
	}
	g.Expect(runningPods(ctx, there, "nginx:1.28.0")()).To(HaveLen(2))
}

// deletionWatch follows the kinds a ModelBox's deletion may remove in some
// namespaces: what each object is owned by, and every deletion.
type deletionWatch struct {
	box types.UID
	mu  sync.Mutex
	// owners maps each object seen to its owners; live is what exists.
	owners map[types.UID][]types.UID
	live   map[types.UID]string
	bad    []string
}

// deletionKinds are the children of a ModelBox and what they make.
var deletionKinds = []schema.GroupVersionResource{
	appsv1.SchemeGroupVersion.WithResource("deployments"),
	appsv1.SchemeGroupVersion.WithResource("replicasets"),
	corev1.SchemeGroupVersion.WithResource("pods"),
	corev1.SchemeGroupVersion.WithResource("services"),
	{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"},
	{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"},
}

// watchDeletions starts watching namespaces for the objects of
// deletionKinds; box is the ModelBox about to be deleted. A deleted object
// not (transitively) owned by box, or one that gains box as an owner
// without having been made for it, is a violation.
func watchDeletions(t *testing.T, namespaces []string, box types.UID) *deletionWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	mc := metadata.NewForConfigOrDie(c.Config)
	w := &deletionWatch{box: box, owners: map[types.UID][]types.UID{}, live: map[types.UID]string{}}
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, ns := range namespaces {
		for _, gvr := range deletionKinds {
			list, err := mc.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatalf("listing %s in %s: %v", gvr.Resource, ns, err)
			}
			for i := range list.Items {
				w.seen(watch.Added, &list.Items[i], gvr.Resource)
			}
			watcher, err := mc.Resource(gvr).Namespace(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
			if err != nil {
				t.Fatalf("watching %s in %s: %v", gvr.Resource, ns, err)
			}
			wg.Go(func() {
				defer watcher.Stop()
				for ev := range watcher.ResultChan() {
					if m, ok := ev.Object.(*metav1.PartialObjectMetadata); ok {
						w.seen(ev.Type, m, gvr.Resource)
					} else if ev.Type == watch.Error {
						w.violate(fmt.Sprintf("the watch of %s in %s failed: %v", gvr.Resource, ns, apierrors.FromObject(ev.Object)))
					}
				}
			})
		}
	}
	return w
}

func (w *deletionWatch) seen(ev watch.EventType, m *metav1.PartialObjectMetadata, kind string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	what := fmt.Sprintf("%s %s/%s", kind, m.Namespace, m.Name)
	owners := make([]types.UID, 0, len(m.OwnerReferences))
	for _, ref := range m.OwnerReferences {
		owners = append(owners, ref.UID)
	}
	if before, known := w.owners[m.UID]; known && !w.ownedLocked(m.UID) && slices.Contains(owners, w.box) && !slices.Contains(before, w.box) {
		w.bad = append(w.bad, fmt.Sprintf("%s was taken over by the ModelBox", what))
	}
	w.owners[m.UID] = owners
	switch ev {
	case watch.Deleted:
		delete(w.live, m.UID)
		if !w.ownedLocked(m.UID) {
			w.bad = append(w.bad, fmt.Sprintf("%s was deleted, and the ModelBox did not own it", what))
		}
	default:
		w.live[m.UID] = what
	}
}

// ownedLocked reports whether uid is box or owned by it, through any chain
// of owners seen.
func (w *deletionWatch) ownedLocked(uid types.UID) bool {
	for range 10 { // ModelBox → Deployment → ReplicaSet → Pod is 3
		if uid == w.box {
			return true
		}
		owners := w.owners[uid]
		if len(owners) != 1 {
			return false
		}
		uid = owners[0]
	}
	return false
}

// left names the objects box still owns.
func (w *deletionWatch) left() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for uid, what := range w.live {
		if w.ownedLocked(uid) && uid != w.box {
			out = append(out, what)
		}
	}
	return out
}

func (w *deletionWatch) violate(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.bad = append(w.bad, s)
}

func (w *deletionWatch) violations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.bad)
}
