//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	modelboxcontroller "github.com/deckhand-dev/deckhand/internal/controller/modelbox"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

const modelBoxWait = 2 * time.Minute

// The seed's sample on a real control plane: 4 Running pods on kwok nodes
// behind a NodePort Service on 30010; a Service deleted by hand comes back
// the same; an image change rolls the pods; deleting the ModelBox removes
// everything through garbage collection.
func TestModelBoxSeedSample(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := c.Namespace(t, nil)
	p := c.RunManager(t, "--controllers", "modelbox")

	root, err := testenv.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Kubectl("apply", "-n", ns, "-f", filepath.Join(root, "config", "samples", "model_v1_modelbox.yaml"))).
		To(ContainSubstring("modelbox.model.deckhand.dev/modelbox-sample created"))
	key := client.ObjectKey{Namespace: ns, Name: "modelbox-sample"}
	started := time.Now()

	g.Eventually(func() (*modelv1.ModelBox, error) {
		box := &modelv1.ModelBox{}
		return box, c.Client.Get(ctx, key, box)
	}).WithTimeout(modelBoxWait).Should(HaveField("Status", And(
		HaveField("ReadyReplicas", BeEquivalentTo(4)),
		HaveField("AvailableReplicas", BeEquivalentTo(4)),
		HaveField("ServiceType", corev1.ServiceTypeNodePort),
		HaveField("NodePorts", ConsistOf(HaveField("NodePort", BeEquivalentTo(30010)))),
		HaveField("Conditions", ContainElement(And(
			HaveField("Type", modelv1.ConditionAvailable), HaveField("Status", metav1.ConditionTrue)))))))
	t.Logf("Available with 4 ready pods after %s", time.Since(started).Round(100*time.Millisecond))
	g.Expect(runningPods(ctx, ns, "nginx:1.28.0")()).To(HaveLen(4))
	g.Expect(c.Kubectl("get", "modelbox", "-n", ns)).To(MatchRegexp(`modelbox-sample\s+nginx:1.28.0\s+4\s+4\s+NodePort\s+True`))

	// The Service, deleted by hand, comes back with the same spec.
	svc := &corev1.Service{}
	g.Expect(c.Client.Get(ctx, key, svc)).To(Succeed())
	g.Expect(c.Client.Delete(ctx, svc)).To(Succeed())
	deleted := time.Now()
	g.Eventually(func() (*corev1.Service, error) {
		again := &corev1.Service{}
		return again, c.Client.Get(ctx, key, again)
	}).WithTimeout(modelBoxWait).Should(And(
		HaveField("UID", Not(Equal(svc.UID))),
		HaveField("Spec.Type", svc.Spec.Type),
		HaveField("Spec.Selector", svc.Spec.Selector),
		HaveField("Spec.Ports", Equal(svc.Spec.Ports))))
	t.Logf("Service back %s after its deletion", time.Since(deleted).Round(100*time.Millisecond))

	// A new image rolls the pods: four Running pods of the new image, none
	// of the old.
	updateModelBox(g, ctx, key, func(box *modelv1.ModelBox) { box.Spec.Image = "nginx:1.8" })
	g.Eventually(runningPods(ctx, ns, "nginx:1.8")).WithTimeout(modelBoxWait).Should(HaveLen(4))
	g.Eventually(runningPods(ctx, ns, "nginx:1.28.0")).WithTimeout(modelBoxWait).Should(BeEmpty())

	// Nothing more to write once the rollout is done, though the Deployment
	// controller keeps writing status (each write wakes Deckhand) until then.
	// This ModelBox's applies only: the manager also sees ModelBoxes other
	// tests left in namespaces still being deleted.
	applies := func() int {
		n := 0
		for line := range strings.Lines(p.Logs()) {
			if strings.Contains(line, `"msg":"applying"`) && strings.Contains(line, `"namespace":"`+ns+`"`) {
				n++
			}
		}
		return n
	}
	g.Eventually(func() (*modelv1.ModelBox, error) {
		box := &modelv1.ModelBox{}
		return box, c.Client.Get(ctx, key, box)
	}).WithTimeout(modelBoxWait).Should(HaveField("Status.UpdatedReplicas", BeEquivalentTo(4)))
	settled := applies()
	t.Logf("child applies for create, Service repair and image change: %d", settled)
	updateModelBox(g, ctx, key, func(box *modelv1.ModelBox) { box.Annotations = map[string]string{"touched": "yes"} })
	g.Consistently(applies).WithTimeout(5 * time.Second).Should(Equal(settled))

	// Deleting the ModelBox removes its children through garbage collection.
	g.Expect(c.Kubectl("delete", "modelbox", "-n", ns, "modelbox-sample", "--wait=true")).To(ContainSubstring("deleted"))
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}} {
		g.Eventually(func() bool {
			return apierrors.IsNotFound(c.Client.Get(ctx, key, obj))
		}).WithTimeout(modelBoxWait).Should(BeTrue(), "%T", obj)
	}
	g.Eventually(runningPods(ctx, ns, "")).WithTimeout(modelBoxWait).Should(BeEmpty())
}

// With autoscaling the kube-controller-manager's HorizontalPodAutoscaler
// owns the replica count and Deckhand never resets it.
func TestModelBoxHPAKeepsItsReplicaCount(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := c.Namespace(t, nil)
	c.RunManager(t, "--controllers", "modelbox")

	box := &modelv1.ModelBox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api"},
		Spec: modelv1.ModelBoxSpec{
			Image:       "nginx:1.28.0",
			Size:        modelv1.SizeSmall,
			Ports:       []modelv1.ServicePort{{Name: "http", Port: 80}},
			Sidecars:    []corev1.Container{{Name: "log", Image: "busybox"}},
			Autoscaling: &modelv1.Autoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 5},
		},
	}
	g.Expect(c.Client.Create(ctx, box)).To(Succeed())
	key := client.ObjectKeyFromObject(box)
	g.Eventually(runningPods(ctx, ns, "nginx:1.28.0")).WithTimeout(modelBoxWait).Should(HaveLen(2))
	g.Eventually(func() error { return c.Client.Get(ctx, key, &autoscalingv2.HorizontalPodAutoscaler{}) }).
		WithTimeout(modelBoxWait).Should(Succeed())

	// The autoscaler, not Deckhand, brings the Deployment up to a new floor.
	updateModelBox(g, ctx, key, func(box *modelv1.ModelBox) { box.Spec.Autoscaling.MinReplicas = ptr.To[int32](3) })
	g.Eventually(deploymentReplicas(ctx, key)).WithTimeout(modelBoxWait).Should(BeEquivalentTo(3))
	g.Expect(replicasManagers(ctx, key)).To(And(Not(ContainElement("deckhand")), ContainElement("kube-controller-manager")))
	g.Eventually(runningPods(ctx, ns, "nginx:1.28.0")).WithTimeout(modelBoxWait).Should(HaveLen(3))

	// A spec change rolls the pods and keeps the autoscaler's count.
	updateModelBox(g, ctx, key, func(box *modelv1.ModelBox) { box.Spec.Image = "nginx:1.8" })
	g.Eventually(runningPods(ctx, ns, "nginx:1.8")).WithTimeout(modelBoxWait).Should(HaveLen(3))
	g.Consistently(deploymentReplicas(ctx, key)).WithTimeout(5 * time.Second).Should(BeEquivalentTo(3))
}

// Turning autoscaling off keeps the pods the autoscaler left, rather than
// dropping to one, until the user sets replicas.
func TestModelBoxAutoscalingOffKeepsItsPods(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := c.Namespace(t, nil)
	c.RunManager(t, "--controllers", "modelbox")

	box := &modelv1.ModelBox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scaled"},
		Spec: modelv1.ModelBoxSpec{
			Image:       "nginx:1.28.0",
			Ports:       []modelv1.ServicePort{{Name: "http", Port: 80}},
			Autoscaling: &modelv1.Autoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 10},
		},
	}
	g.Expect(c.Client.Create(ctx, box)).To(Succeed())
	key := client.ObjectKeyFromObject(box)
	g.Eventually(runningPods(ctx, ns, "nginx:1.28.0")).WithTimeout(modelBoxWait).Should(HaveLen(2))
	g.Eventually(replicasManagers).WithArguments(ctx, key).WithTimeout(modelBoxWait).ShouldNot(ContainElement("deckhand"))

	// Scale to 8 through /scale, as the autoscaler does under load (this
	// cluster has no metrics server, so its own autoscaler holds still).
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 8}}
	g.Expect(c.Client.SubResource("scale").Update(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: box.Name}},
		client.WithSubResourceBody(scale))).To(Succeed())
	g.Eventually(runningPods(ctx, ns, "nginx:1.28.0")).WithTimeout(modelBoxWait).Should(HaveLen(8))

	updateModelBox(g, ctx, key, func(box *modelv1.ModelBox) { box.Spec.Autoscaling = nil })
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Client.Get(ctx, key, &autoscalingv2.HorizontalPodAutoscaler{}))
	}).WithTimeout(modelBoxWait).Should(BeTrue())
	g.Eventually(func() (*modelv1.ModelBox, error) {
		got := &modelv1.ModelBox{}
		return got, c.Client.Get(ctx, key, got)
	}).WithTimeout(modelBoxWait).Should(HaveField("Status.ObservedGeneration", box.Generation+1))
	g.Expect(deploymentReplicas(ctx, key)()).To(BeEquivalentTo(8))
	g.Expect(runningPods(ctx, ns, "nginx:1.28.0")()).To(HaveLen(8))

	// Setting replicas hands the count back to Deckhand.
	updateModelBox(g, ctx, key, func(box *modelv1.ModelBox) { box.Spec.Replicas = ptr.To[int32](3) })
	g.Eventually(runningPods(ctx, ns, "nginx:1.28.0")).WithTimeout(modelBoxWait).Should(HaveLen(3))
}

func updateModelBox(g Gomega, ctx context.Context, key client.ObjectKey, change func(*modelv1.ModelBox)) {
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		box := &modelv1.ModelBox{}
		if err := c.Client.Get(ctx, key, box); err != nil {
			return err
		}
		change(box)
		return c.Client.Update(ctx, box)
	})).To(Succeed())
}

// replicasManagers names the field managers that own the Deployment's
// spec.replicas.
func replicasManagers(ctx context.Context, key client.ObjectKey) ([]string, error) {
	d := &appsv1.Deployment{}
	if err := c.Client.Get(ctx, key, d); err != nil {
		return nil, err
	}
	var names []string
	for _, m := range d.ManagedFields {
		if m.FieldsV1 != nil && strings.Contains(m.FieldsV1.GetRawString(), `"f:spec":{"f:replicas"`) {
			names = append(names, m.Manager)
		}
	}
	return names, nil
}

func deploymentReplicas(ctx context.Context, key client.ObjectKey) func() (int32, error) {
	return func() (int32, error) {
		d := &appsv1.Deployment{}
		if err := c.Client.Get(ctx, key, d); err != nil {
			return 0, err
		}
		return ptr.Deref(d.Spec.Replicas, 1), nil
	}
}

// runningPods lists the namespace's ModelBox pods that are Running, not
// being deleted, on a node, and (when image is not empty) run image.
func runningPods(ctx context.Context, ns, image string) func() ([]string, error) {
	return func() ([]string, error) {
		pods := &corev1.PodList{}
		if err := c.Client.List(ctx, pods, client.InNamespace(ns), client.HasLabels{modelboxcontroller.LabelModelBox}); err != nil {
			return nil, err
		}
		var names []string
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || p.Spec.NodeName == "" {
				continue
			}
			if image != "" && p.Spec.Containers[0].Image != image {
				continue
			}
			names = append(names, p.Name)
		}
		return names, nil
	}
}
