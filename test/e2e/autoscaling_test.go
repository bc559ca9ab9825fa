//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	modelboxcontroller "github.com/deckhand-dev/deckhand/internal/controller/modelbox"
	"github.com/deckhand-dev/deckhand/test/cluster"
)

// An HPA acts on real CPU use: metrics-server (hack/realnode.sh) reads the
// real node's kubelet; the local cluster's controller-manager looks every
// 5 s and scales in after 30 s of lower use (hack/cluster.sh).
const autoscaleWait = 4 * time.Minute

// burnerResources caps each pod at twice its request: one burning pod is
// at 200% of its request, which an HPA aiming at 50% answers with more pods.
var burnerResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")},
	Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
}

// burnFor is a shell script that keeps a CPU busy for the given seconds
// after it starts, then sleeps.
func burnFor(seconds int) string {
	return fmt.Sprintf("end=$(( $(date +%%s) + %d )); while [ $(date +%%s) -lt $end ]; do :; done; exec sleep 3600", seconds)
}

// A PodSet is an HPA's target through its scale subresource: under a CPU
// burner on the real node the HPA scales it out, Deckhand makes the pods,
// and once the burn ends the HPA scales it back in. Only the HPA ever
// changes spec.replicas.
func TestRealNodeHPAScalesAPodSetOutAndIn(t *testing.T) {
	node := c.RealNode(t)
	g := rnG(t)
	g.SetDefaultEventuallyTimeout(autoscaleWait)
	ctx := context.Background()
	ns := c.RealNodeNamespace(t, nil)
	c.RunManager(t, "--controllers", "podset")

	spec := restrictedSpec("sh", "-c", burnFor(60))
	spec.Containers[0].Resources = burnerResources
	set := &appsv1beta1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "burner"},
		Spec: appsv1beta1.PodSetSpec{Replicas: 1, Template: &corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "burner"}}, Spec: spec}},
	}
	g.Expect(c.Client.Create(ctx, set)).To(Succeed())
	g.Expect(c.Client.Create(ctx, cpuHPA(ns, "burner", autoscalingv2.CrossVersionObjectReference{
		APIVersion: appsv1beta1.GroupVersion.String(), Kind: "PodSet", Name: "burner"}))).To(Succeed())

	podSet := func(g Gomega) *appsv1beta1.PodSet {
		s := &appsv1beta1.PodSet{}
		g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(set), s)).To(Succeed())
		return s
	}
	// Out: more than one pod, each running on the real node.
	g.Eventually(func(g Gomega) {
		s := podSet(g)
		g.Expect(s.Spec.Replicas).To(BeNumerically(">", 1))
		g.Expect(s.Status.ReadyReplicas).To(Equal(s.Spec.Replicas))
	}).Should(Succeed())
	pods := &corev1.PodList{}
	g.Expect(c.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": "burner"})).To(Succeed())
	for _, p := range pods.Items {
		g.Expect(p.Spec.NodeName).To(Equal(node))
	}
	// In: the burn over, one pod again.
	g.Eventually(func(g Gomega) {
		s := podSet(g)
		g.Expect(s.Spec.Replicas).To(BeEquivalentTo(1))
		g.Expect(s.Status.Replicas).To(BeEquivalentTo(1))
	}).Should(Succeed())
	notWrittenByDeckhand(g, podSet(g).ManagedFields, "spec")
}

// A ModelBox with autoscaling makes its HPA; under a CPU burner in its pod
// on the real node the HPA scales the Deployment out and back in, and
// Deckhand never sets the Deployment's replicas meanwhile.
func TestRealNodeModelBoxAutoscalesOutAndIn(t *testing.T) {
	c.RealNode(t)
	g := rnG(t)
	g.SetDefaultEventuallyTimeout(autoscaleWait)
	ctx := context.Background()
	ns := c.RealNodeNamespace(t, nil)
	c.RunManager(t, "--controllers", "modelbox")

	box := &modelv1.ModelBox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llm"},
		Spec: modelv1.ModelBoxSpec{
			Image:       cluster.HTTPDImage,
			Ports:       []modelv1.ServicePort{{Name: "http", Port: 8080}},
			Resources:   burnerResources.DeepCopy(),
			Autoscaling: &modelv1.Autoscaling{MinReplicas: ptr.To[int32](1), MaxReplicas: 3, TargetCPUUtilizationPercentage: ptr.To[int32](50)},
		},
	}
	g.Expect(c.Client.Create(ctx, box)).To(Succeed())
	deployment := func(g Gomega) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "llm"}, d)).To(Succeed())
		return d
	}
	var pod string
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(c.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{modelboxcontroller.LabelModelBox: "llm"})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		g.Expect(pods.Items[0].Status.Phase).To(Equal(corev1.PodRunning))
		pod = pods.Items[0].Name
	}).Should(Succeed())

	// The burner runs inside the box's container, so its CPU is the pod's.
	burned := make(chan error, 1)
	go func() {
		_, err := c.KubectlWithin(2*time.Minute, "exec", "-n", ns, pod, "--", "sh", "-c", strings.TrimSuffix(burnFor(75), "; exec sleep 3600"))
		burned <- err
	}()
	g.Eventually(func(g Gomega) {
		d := deployment(g)
		g.Expect(ptr.Deref(d.Spec.Replicas, 1)).To(BeNumerically(">", 1))
		g.Expect(d.Status.ReadyReplicas).To(Equal(ptr.Deref(d.Spec.Replicas, 1)))
	}).Should(Succeed())
	g.Expect(<-burned).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(ptr.Deref(deployment(g).Spec.Replicas, 1)).To(BeEquivalentTo(1))
	}).Should(Succeed())
	notWrittenByDeckhand(g, deployment(g).ManagedFields, "spec", "replicas")

	b := &modelv1.ModelBox{}
	g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(box), b)).To(Succeed())
	g.Expect(b.Status.Conditions).To(ContainElement(And(HaveField("Type", "Ready"), HaveField("Status", metav1.ConditionTrue))))
}

// cpuHPA scales target between 1 and 3 pods, aiming at 50% of their CPU
// requests.
func cpuHPA(ns, name string, target autoscalingv2.CrossVersionObjectReference) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: target, MinReplicas: ptr.To[int32](1), MaxReplicas: 3,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}},
		},
	}
}

// notWrittenByDeckhand checks that no field manager of the Deckhand manager
// owns the field at path (say spec, replicas): only the HPA (through the
// scale subresource) and the test set it.
func notWrittenByDeckhand(g Gomega, fields []metav1.ManagedFieldsEntry, path ...string) {
	for _, f := range fields {
		if !strings.Contains(f.Manager, "deckhand") || f.Subresource != "" || f.FieldsV1 == nil {
			continue
		}
		var owned map[string]any
		g.Expect(json.Unmarshal(f.FieldsV1.GetRawBytes(), &owned)).To(Succeed())
		for i, p := range path {
			next, ok := owned["f:"+p].(map[string]any)
			if !ok {
				break
			}
			g.Expect(i).NotTo(Equal(len(path)-1), "%s owns %v (%s): Deckhand fights the HPA", f.Manager, path, f.Operation)
			owned = next
		}
	}
}
