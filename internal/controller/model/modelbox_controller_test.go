package model_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

const timeout = 30 * time.Second

// seedBox is the seed's sample, with the node port given: node ports are
// cluster-wide, and envtest never deletes a namespace's contents.
func seedBox(ns string, nodePort int32) *modelv1.ModelBox {
	return &modelv1.ModelBox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "modelbox-sample"},
		Spec: modelv1.ModelBoxSpec{
			Name:          "nginx",
			Image:         "nginx:1.7.9",
			Replicas:      ptr.To[int32](4),
			RollingUpdate: ptr.To(intstr.FromString("30%")),
			Ports:         []modelv1.ServicePort{{Port: 80, TargetPort: 80, NodePort: nodePort}},
		},
	}
}

func start(t *testing.T) (Gomega, context.Context, string) {
	t.Helper()
	ns := env.Namespace(t)
	env.StartManager(t, env.ManagerOptions())
	return NewWithT(t), context.Background(), ns
}

func get[T client.Object](ctx context.Context, key client.ObjectKey, obj T) func() (T, error) {
	return func() (T, error) { return obj, env.Client.Get(ctx, key, obj) }
}

func TestSeedSampleBecomesDeploymentServiceAndPDB(t *testing.T) {
	g, ctx, ns := start(t)
	box := seedBox(ns, 30010)
	g.Expect(env.Client.Create(ctx, box)).To(Succeed())
	key := client.ObjectKeyFromObject(box)
	owner := HaveField("OwnerReferences", ConsistOf(And(
		HaveField("UID", box.UID), HaveField("Controller", HaveValue(BeTrue())))))

	deploy := &appsv1.Deployment{}
	g.Eventually(get(ctx, key, deploy)).WithTimeout(timeout).Should(HaveField("ObjectMeta", owner))
	g.Expect(deploy.Spec.Replicas).To(HaveValue(BeEquivalentTo(4)))
	g.Expect(deploy.Spec.Strategy.RollingUpdate.MaxSurge).To(HaveValue(Equal(intstr.FromString("30%"))))
	g.Expect(deploy.Spec.Template.Spec.Containers).To(ConsistOf(And(
		HaveField("Name", "nginx"),
		HaveField("Image", "nginx:1.7.9"),
		HaveField("ReadinessProbe.TCPSocket.Port", intstr.FromInt32(80)),
		HaveField("Resources.Requests", HaveKey(corev1.ResourceCPU)))))

	svc := &corev1.Service{}
	g.Eventually(get(ctx, key, svc)).WithTimeout(timeout).Should(HaveField("ObjectMeta", owner))
	g.Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeNodePort))
	g.Expect(svc.Spec.Ports).To(ConsistOf(And(HaveField("Port", BeEquivalentTo(80)), HaveField("NodePort", BeEquivalentTo(30010)))))

	pdb := &policyv1.PodDisruptionBudget{}
	g.Eventually(get(ctx, key, pdb)).WithTimeout(timeout).Should(HaveField("Spec.MaxUnavailable", HaveValue(Equal(intstr.FromInt32(1)))))
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, key, &autoscalingv2.HorizontalPodAutoscaler{}))).To(BeTrue())

	// No Deployment controller runs in envtest: play its part.
	setDeploymentAvailable(g, ctx, deploy, 4)

	g.Eventually(get(ctx, key, box)).WithTimeout(timeout).Should(HaveField("Status", And(
		HaveField("ObservedGeneration", box.Generation),
		HaveField("ReadyReplicas", BeEquivalentTo(4)),
		HaveField("ServiceName", "modelbox-sample"),
		HaveField("ServiceType", corev1.ServiceTypeNodePort),
		HaveField("ClusterIP", svc.Spec.ClusterIP),
		HaveField("NodePorts", ConsistOf(HaveField("NodePort", BeEquivalentTo(30010)))),
		HaveField("Conditions", ContainElements(
			condition(modelv1.ConditionAvailable, metav1.ConditionTrue),
			condition(modelv1.ConditionProgressing, metav1.ConditionFalse),
			condition(modelv1.ConditionDegraded, metav1.ConditionFalse))))))

	g.Eventually(eventNotes(ctx, ns, box.Name)).WithTimeout(timeout).Should(ContainElements(
		"Created Deployment modelbox-sample", "Created Service modelbox-sample", "Created PodDisruptionBudget modelbox-sample"))
}

func TestDriftIsRepairedAndOthersFieldsAreLeftAlone(t *testing.T) {
	g, ctx, ns := start(t)
	box := seedBox(ns, 30011)
	g.Expect(env.Client.Create(ctx, box)).To(Succeed())
	key := client.ObjectKeyFromObject(box)

	// A Service deleted by hand comes back with the same spec.
	svc := &corev1.Service{}
	g.Eventually(exists(ctx, key, svc)).WithTimeout(timeout).Should(Succeed())
	oldUID := svc.UID
	g.Expect(env.Client.Delete(ctx, svc)).To(Succeed())
	g.Eventually(get(ctx, key, &corev1.Service{})).WithTimeout(timeout).Should(And(
		HaveField("UID", Not(Equal(oldUID))),
		HaveField("Spec.Type", corev1.ServiceTypeNodePort),
		HaveField("Spec.Ports", ConsistOf(HaveField("NodePort", BeEquivalentTo(30011))))))

	// Someone edits the image (an Update, as kubectl edit does) and adds an
	// annotation: the image is restored, the annotation stays.
	deploy := &appsv1.Deployment{}
	g.Eventually(exists(ctx, key, deploy)).WithTimeout(timeout).Should(Succeed())
	deploy.Spec.Template.Spec.Containers[0].Image = "nginx:evil"
	deploy.Annotations = map[string]string{"team": "web"}
	g.Expect(env.Client.Update(ctx, deploy, client.FieldOwner("kubectl-edit"))).To(Succeed())
	g.Eventually(get(ctx, key, &appsv1.Deployment{})).WithTimeout(timeout).Should(And(
		HaveField("Spec.Template.Spec.Containers", ContainElement(HaveField("Image", "nginx:1.7.9"))),
		HaveField("Annotations", HaveKeyWithValue("team", "web"))))
	g.Eventually(eventNotes(ctx, ns, box.Name)).WithTimeout(timeout).Should(ContainElement("Updated Deployment modelbox-sample"))

	// A spec change keeps the Service's cluster IP.
	g.Eventually(exists(ctx, key, svc)).WithTimeout(timeout).Should(Succeed())
	clusterIP := svc.Spec.ClusterIP
	updateBox(g, ctx, key, func(box *modelv1.ModelBox) {
		box.Spec.Ports[0].Name = "http"
		box.Spec.Ports = append(box.Spec.Ports, modelv1.ServicePort{Name: "admin", Port: 8081})
	})
	g.Eventually(get(ctx, key, &corev1.Service{})).WithTimeout(timeout).Should(And(
		HaveField("Spec.Ports", HaveLen(2)),
		HaveField("Spec.ClusterIP", clusterIP)))
}

func TestHPAOwnsReplicas(t *testing.T) {
	g, ctx, ns := start(t)
	box := seedBox(ns, 30012)
	box.Spec.Replicas = ptr.To[int32](3)
	g.Expect(env.Client.Create(ctx, box)).To(Succeed())
	key := client.ObjectKeyFromObject(box)
	g.Eventually(get(ctx, key, &appsv1.Deployment{})).WithTimeout(timeout).Should(HaveField("Spec.Replicas", HaveValue(BeEquivalentTo(3))))

	// Turn autoscaling on: the count stays 3 (dropping the field from the
	// apply must not reset it to 1) and Deckhand stops owning it.
	updateBox(g, ctx, key, func(box *modelv1.ModelBox) {
		box.Spec.Replicas = nil
		box.Spec.Autoscaling = &modelv1.Autoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 6}
	})
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	g.Eventually(get(ctx, key, hpa)).WithTimeout(timeout).Should(HaveField("Spec", And(
		HaveField("MinReplicas", HaveValue(BeEquivalentTo(2))),
		HaveField("MaxReplicas", BeEquivalentTo(6)),
		HaveField("ScaleTargetRef.Name", box.Name))))
	g.Eventually(deckhandOwnsReplicas(ctx, key)).WithTimeout(timeout).Should(BeFalse())
	g.Expect(get(ctx, key, &appsv1.Deployment{})()).To(HaveField("Spec.Replicas", HaveValue(BeEquivalentTo(3))))

	// The autoscaler scales through the scale subresource; a later spec
	// change rolls the image and leaves its count alone.
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 5}}
	g.Expect(env.Client.SubResource("scale").Update(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: box.Name}},
		client.WithSubResourceBody(scale), client.FieldOwner("horizontal-pod-autoscaler"))).To(Succeed())
	updateBox(g, ctx, key, func(box *modelv1.ModelBox) {
		box.Spec.Image = "nginx:1.27"
	})
	g.Eventually(get(ctx, key, &appsv1.Deployment{})).WithTimeout(timeout).Should(
		HaveField("Spec.Template.Spec.Containers", ContainElement(HaveField("Image", "nginx:1.27"))))
	g.Consistently(get(ctx, key, &appsv1.Deployment{})).WithTimeout(2 * time.Second).Should(
		HaveField("Spec.Replicas", HaveValue(BeEquivalentTo(5))))

	// Autoscaling off again: the HPA goes and Deckhand sets the count.
	updateBox(g, ctx, key, func(box *modelv1.ModelBox) {
		box.Spec.Autoscaling = nil
		box.Spec.Replicas = ptr.To[int32](1)
	})
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, key, &autoscalingv2.HorizontalPodAutoscaler{}))
	}).WithTimeout(timeout).Should(BeTrue())
	g.Eventually(get(ctx, key, &appsv1.Deployment{})).WithTimeout(timeout).Should(HaveField("Spec.Replicas", HaveValue(BeEquivalentTo(1))))
	// One pod: no disruption budget.
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, key, &policyv1.PodDisruptionBudget{}))
	}).WithTimeout(timeout).Should(BeTrue())
}

func TestNewAutoscaledBoxStartsAtMinReplicas(t *testing.T) {
	g, ctx, ns := start(t)
	box := seedBox(ns, 30013)
	box.Spec.Replicas = nil
	box.Spec.Autoscaling = &modelv1.Autoscaling{MinReplicas: ptr.To[int32](3), MaxReplicas: 6}
	g.Expect(env.Client.Create(ctx, box)).To(Succeed())
	key := client.ObjectKeyFromObject(box)
	g.Eventually(get(ctx, key, &appsv1.Deployment{})).WithTimeout(timeout).Should(HaveField("Spec.Replicas", HaveValue(BeEquivalentTo(3))))
	g.Eventually(deckhandOwnsReplicas(ctx, key)).WithTimeout(timeout).Should(BeFalse())
	g.Expect(get(ctx, key, &appsv1.Deployment{})()).To(HaveField("Spec.Replicas", HaveValue(BeEquivalentTo(3))))
}

// An idle ModelBox costs no writes: reconciles caused by unrelated changes
// compare what Deckhand owns with what it wants and stop there.
func TestIdleModelBoxWritesNothing(t *testing.T) {
	g, ctx, ns := start(t)
	box := seedBox(ns, 30014)
	box.Spec.Replicas = nil
	box.Spec.Size = modelv1.SizeCustom
	box.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000m")}}
	box.Spec.Autoscaling = &modelv1.Autoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 3}
	box.Spec.Envs = []corev1.EnvVar{{Name: "A", Value: "b"}}
	// A port without a protocol: the apiserver defaults it to TCP.
	box.Spec.Sidecars = []corev1.Container{{Name: "log", Image: "busybox", Args: []string{"sleep", "1d"}, Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9100}}}}
	box.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
	box.Spec.Probes = &modelv1.Probes{Readiness: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}}}}
	g.Expect(env.Client.Create(ctx, box)).To(Succeed())
	key := client.ObjectKeyFromObject(box)

	children := []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &autoscalingv2.HorizontalPodAutoscaler{}, &policyv1.PodDisruptionBudget{}}
	versions := func() ([]string, error) {
		var out []string
		for _, c := range append(children, &modelv1.ModelBox{}) {
			if err := env.Client.Get(ctx, key, c); err != nil {
				return nil, err
			}
			out = append(out, fmt.Sprintf("%T@%s", c, c.GetResourceVersion()))
		}
		return out, nil
	}
	// Settled: the replicas handover is done and the resource versions stop
	// moving.
	g.Eventually(deckhandOwnsReplicas(ctx, key)).WithTimeout(timeout).Should(BeFalse())
	var settled []string
	g.Eventually(func() (bool, error) {
		now, err := versions()
		same := slices.Equal(now, settled)
		settled = now
		return same, err
	}).WithTimeout(timeout).WithPolling(time.Second).Should(BeTrue())

	writes := counterSum(g, "deckhand_modelbox_child_writes_total", nil)
	reconciles := counterSum(g, "controller_runtime_reconcile_total", map[string]string{"controller": "modelbox"})

	// No hot loop: left alone, nothing reconciles.
	g.Consistently(func() float64 {
		return counterSum(g, "controller_runtime_reconcile_total", map[string]string{"controller": "modelbox"})
	}).WithTimeout(3 * time.Second).Should(Equal(reconciles))

	// Wake the controller three times with changes that need no child write.
	for i := range 3 {
		updateBox(g, ctx, key, func(box *modelv1.ModelBox) {
			box.Annotations = map[string]string{"touch": fmt.Sprint(i)}
		})
	}
	g.Eventually(func() float64 {
		return counterSum(g, "controller_runtime_reconcile_total", map[string]string{"controller": "modelbox"})
	}).WithTimeout(timeout).Should(BeNumerically(">", reconciles))
	g.Expect(counterSum(g, "deckhand_modelbox_child_writes_total", nil)).To(Equal(writes))
	now, err := versions()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(now[:len(children)]).To(Equal(settled[:len(children)]), "children's resource versions")
}

func TestForeignObjectIsNotTakenOver(t *testing.T) {
	g, ctx, ns := start(t)
	mine := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "modelbox-sample"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}},
	}
	g.Expect(env.Client.Create(ctx, mine)).To(Succeed())
	box := seedBox(ns, 30015)
	g.Expect(env.Client.Create(ctx, box)).To(Succeed())
	g.Eventually(get(ctx, client.ObjectKeyFromObject(box), box)).WithTimeout(timeout).Should(HaveField("Status.Conditions", ContainElement(And(
		condition(modelv1.ConditionDegraded, metav1.ConditionTrue),
		HaveField("Message", ContainSubstring("Service "+ns+"/modelbox-sample exists and is not controlled by this ModelBox"))))))
	g.Expect(get(ctx, client.ObjectKeyFromObject(mine), &corev1.Service{})()).To(And(
		HaveField("OwnerReferences", BeEmpty()),
		HaveField("Spec.Ports", ConsistOf(HaveField("Port", BeEquivalentTo(443))))))
	// The Deployment is still made.
	g.Eventually(exists(ctx, client.ObjectKeyFromObject(box), &appsv1.Deployment{})).WithTimeout(timeout).Should(Succeed())
}

// updateBox changes the ModelBox at key, retrying when the controller's
// status writes get in between.
func updateBox(g Gomega, ctx context.Context, key client.ObjectKey, change func(*modelv1.ModelBox)) {
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		box := &modelv1.ModelBox{}
		if err := env.Client.Get(ctx, key, box); err != nil {
			return err
		}
		change(box)
		return env.Client.Update(ctx, box)
	})).To(Succeed())
}

func exists(ctx context.Context, key client.ObjectKey, obj client.Object) func() error {
	return func() error { return env.Client.Get(ctx, key, obj) }
}

func condition(t string, s metav1.ConditionStatus) OmegaMatcher {
	return And(HaveField("Type", t), HaveField("Status", s))
}

// setDeploymentAvailable writes the status the Deployment controller would.
func setDeploymentAvailable(g Gomega, ctx context.Context, d *appsv1.Deployment, n int32) {
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation,
		Replicas:           n, ReadyReplicas: n, UpdatedReplicas: n, AvailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		},
	}
	g.Expect(env.Client.Status().Update(ctx, d)).To(Succeed())
}

// deckhandOwnsReplicas reports whether Deckhand's field manager owns the
// Deployment's spec.replicas.
func deckhandOwnsReplicas(ctx context.Context, key client.ObjectKey) func() (bool, error) {
	return func() (bool, error) {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, key, d); err != nil {
			return false, err
		}
		for _, m := range d.ManagedFields {
			if m.Manager == "deckhand" && m.Operation == metav1.ManagedFieldsOperationApply && m.FieldsV1 != nil &&
				strings.Contains(m.FieldsV1.GetRawString(), `"f:replicas"`) {
				return true, nil
			}
		}
		return false, nil
	}
}

func eventNotes(ctx context.Context, ns, name string) func() ([]string, error) {
	return func() ([]string, error) {
		list := &eventsv1.EventList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Regarding.Kind == "ModelBox" {
				notes = append(notes, e.Note)
			}
		}
		slices.Sort(notes)
		return notes, nil
	}
}

// counterSum adds up a counter's series whose labels include want.
func counterSum(g Gomega, name string, want map[string]string) float64 {
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue series
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}
