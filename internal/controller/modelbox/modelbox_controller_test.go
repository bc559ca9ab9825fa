package modelbox_test

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
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	modelboxcontroller "github.com/deckhand-dev/deckhand/internal/controller/modelbox"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

var ctx = context.Background()

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
			Ports:         []modelv1.ServicePort{{Port: 80, TargetPort: ptr.To(intstr.FromInt32(80)), NodePort: nodePort}},
		},
	}
}

// startSeedBox runs a manager with the ModelBox controller for t and
// creates, in a namespace of t's own, the seed's sample on nodePort after
// change (if not nil) has edited it.
func startSeedBox(t *testing.T, nodePort int32, change func(*modelv1.ModelBox)) (*WithT, *modelv1.ModelBox, client.ObjectKey) {
	t.Helper()
	box := seedBox(env.Namespace(t), nodePort)
	if change != nil {
		change(box)
	}
	env.StartManager(t, env.ManagerOptions())
	env.Create(t, box)
	return testenv.NewG(t), box, client.ObjectKeyFromObject(box)
}

// autoscaled makes the seed's sample autoscale between min and max pods.
func autoscaled(minPods, maxPods int32) func(*modelv1.ModelBox) {
	return func(box *modelv1.ModelBox) {
		box.Spec.Replicas = nil
		box.Spec.Autoscaling = &modelv1.Autoscaling{MinReplicas: ptr.To(minPods), MaxReplicas: maxPods}
	}
}

// haveReplicas matches a Deployment whose spec asks for n pods.
func haveReplicas(n int) OmegaMatcher {
	return HaveField("Spec.Replicas", HaveValue(BeEquivalentTo(n)))
}

// get reads obj afresh at key each time it is called, for Eventually.
func get[T client.Object](key client.ObjectKey, obj T) func() (T, error) {
	return func() (T, error) { return obj, env.Client.Get(ctx, key, obj) }
}

// gone is true once obj at key no longer exists.
func gone(key client.ObjectKey, obj client.Object) func() (bool, error) {
	exists := env.Exists(obj)
	obj.SetNamespace(key.Namespace)
	obj.SetName(key.Name)
	return func() (bool, error) {
		ok, err := exists()
		return !ok, err
	}
}

func TestSeedSampleBecomesDeploymentServiceAndPDB(t *testing.T) {
	g, box, key := startSeedBox(t, 30010, nil)
	ns := key.Namespace
	owner := HaveField("OwnerReferences", ConsistOf(And(
		HaveField("UID", box.UID), HaveField("Controller", HaveValue(BeTrue())))))

	deploy := &appsv1.Deployment{}
	g.Eventually(get(key, deploy)).Should(HaveField("ObjectMeta", owner))
	g.Expect(deploy.Spec.Replicas).To(HaveValue(BeEquivalentTo(4)))
	g.Expect(deploy.Spec.Strategy.RollingUpdate.MaxSurge).To(HaveValue(Equal(intstr.FromString("30%"))))
	g.Expect(deploy.Spec.Template.Spec.Containers).To(ConsistOf(And(
		HaveField("Name", "nginx"),
		HaveField("Image", "nginx:1.7.9"),
		HaveField("ReadinessProbe.TCPSocket.Port", intstr.FromInt32(80)),
		HaveField("Resources.Requests", HaveKey(corev1.ResourceCPU)))))

	svc := &corev1.Service{}
	g.Eventually(get(key, svc)).Should(HaveField("ObjectMeta", owner))
	g.Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeNodePort))
	g.Expect(svc.Spec.Ports).To(ConsistOf(And(HaveField("Port", BeEquivalentTo(80)), HaveField("NodePort", BeEquivalentTo(30010)))))

	pdb := &policyv1.PodDisruptionBudget{}
	g.Eventually(get(key, pdb)).Should(HaveField("Spec.MaxUnavailable", HaveValue(Equal(intstr.FromInt32(1)))))
	g.Expect(gone(key, &autoscalingv2.HorizontalPodAutoscaler{})()).To(BeTrue())

	// No Deployment controller runs in envtest: play its part.
	setDeploymentAvailable(g, deploy, 4)

	g.Eventually(get(key, box)).Should(HaveField("Status", And(
		HaveField("ObservedGeneration", box.Generation),
		HaveField("ReadyReplicas", BeEquivalentTo(4)),
		HaveField("ServiceName", "modelbox-sample"),
		HaveField("ServiceType", corev1.ServiceTypeNodePort),
		HaveField("ClusterIP", svc.Spec.ClusterIP),
		HaveField("NodePorts", ConsistOf(HaveField("NodePort", BeEquivalentTo(30010)))),
		HaveField("Conditions", And(
			testenv.HaveCondition(modelv1.ConditionAvailable, metav1.ConditionTrue, modelv1.ReasonMinimumReplicasAvailable),
			testenv.HaveCondition(modelv1.ConditionProgressing, metav1.ConditionFalse, modelv1.ReasonRolloutComplete),
			testenv.HaveCondition(modelv1.ConditionDegraded, metav1.ConditionFalse, modelv1.ReasonAsExpected))))))

	// One Event for the children one sync created, not one per child.
	g.Eventually(env.Events(ns, box)).Should(ContainElement(
		"Created: Created Deployment, Service and PodDisruptionBudget modelbox-sample"))
}

func TestDriftIsRepairedAndOthersFieldsAreLeftAlone(t *testing.T) {
	g, box, key := startSeedBox(t, 30011, nil)
	ns := key.Namespace

	// A Service deleted by hand comes back with the same spec.
	svc := &corev1.Service{}
	g.Eventually(get(key, svc)).Should(HaveField("UID", Not(BeEmpty())))
	oldUID := svc.UID
	g.Expect(env.Client.Delete(ctx, svc)).To(Succeed())
	g.Eventually(get(key, &corev1.Service{})).Should(And(
		HaveField("UID", Not(Equal(oldUID))),
		HaveField("Spec.Type", corev1.ServiceTypeNodePort),
		HaveField("Spec.Ports", ConsistOf(HaveField("NodePort", BeEquivalentTo(30011))))))

	// Someone edits the image (an Update, as kubectl edit does) and adds an
	// annotation: the image is restored, the annotation stays.
	deploy := &appsv1.Deployment{}
	g.Eventually(get(key, deploy)).Should(HaveField("UID", Not(BeEmpty())))
	deploy.Spec.Template.Spec.Containers[0].Image = "nginx:evil"
	deploy.Annotations = map[string]string{"team": "web"}
	g.Expect(env.Client.Update(ctx, deploy, client.FieldOwner("kubectl-edit"))).To(Succeed())
	g.Eventually(get(key, &appsv1.Deployment{})).Should(And(
		HaveField("Spec.Template.Spec.Containers", ContainElement(HaveField("Image", "nginx:1.7.9"))),
		HaveField("Annotations", HaveKeyWithValue("team", "web"))))
	g.Eventually(env.Events(ns, box)).Should(ContainElement("Updated: Updated Deployment modelbox-sample"))

	// A spec change keeps the Service's cluster IP.
	g.Expect(get(key, svc)()).To(HaveField("Spec.ClusterIP", Not(BeEmpty())))
	clusterIP := svc.Spec.ClusterIP
	g.Expect(env.Update(box, func() {
		box.Spec.Ports[0].Name = "http"
		box.Spec.Ports = append(box.Spec.Ports, modelv1.ServicePort{Name: "admin", Port: 8081})
	})).To(Succeed())
	g.Eventually(get(key, &corev1.Service{})).Should(And(
		HaveField("Spec.Ports", HaveLen(2)),
		HaveField("Spec.ClusterIP", clusterIP)))
}

func TestHPAOwnsReplicas(t *testing.T) {
	g, box, key := startSeedBox(t, 30012, func(box *modelv1.ModelBox) { box.Spec.Replicas = ptr.To[int32](3) })
	g.Eventually(get(key, &appsv1.Deployment{})).Should(haveReplicas(3))

	// Turn autoscaling on: the count stays 3 (dropping the field from the
	// apply must not reset it to 1) and Deckhand stops owning it.
	g.Expect(env.Update(box, func() {
		box.Spec.Replicas = nil
		box.Spec.Autoscaling = &modelv1.Autoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 6}
	})).To(Succeed())
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	g.Eventually(get(key, hpa)).Should(HaveField("Spec", And(
		HaveField("MinReplicas", HaveValue(BeEquivalentTo(2))),
		HaveField("MaxReplicas", BeEquivalentTo(6)),
		HaveField("ScaleTargetRef.Name", box.Name))))
	g.Eventually(deckhandOwnsReplicas(key)).Should(BeFalse())
	g.Expect(get(key, &appsv1.Deployment{})()).To(haveReplicas(3))

	// The autoscaler scales through the scale subresource; a later spec
	// change rolls the image and leaves its count alone.
	scaleDeployment(g, key, 5)
	g.Expect(env.Update(box, func() { box.Spec.Image = "nginx:1.27" })).To(Succeed())
	g.Eventually(get(key, &appsv1.Deployment{})).Should(
		HaveField("Spec.Template.Spec.Containers", ContainElement(HaveField("Image", "nginx:1.27"))))
	g.Consistently(get(key, &appsv1.Deployment{})).Should(
		haveReplicas(5))

	// Autoscaling off again: the HPA goes and Deckhand sets the count.
	g.Expect(env.Update(box, func() {
		box.Spec.Autoscaling = nil
		box.Spec.Replicas = ptr.To[int32](1)
	})).To(Succeed())
	g.Eventually(gone(key, &autoscalingv2.HorizontalPodAutoscaler{})).Should(BeTrue())
	g.Eventually(get(key, &appsv1.Deployment{})).Should(haveReplicas(1))
	// One pod: no disruption budget.
	g.Eventually(gone(key, &policyv1.PodDisruptionBudget{})).Should(BeTrue())
}

func TestNewAutoscaledBoxStartsAtMinReplicas(t *testing.T) {
	g, _, key := startSeedBox(t, 30013, autoscaled(3, 6))
	g.Eventually(get(key, &appsv1.Deployment{})).Should(haveReplicas(3))
	g.Eventually(deckhandOwnsReplicas(key)).Should(BeFalse())
	g.Expect(get(key, &appsv1.Deployment{})()).To(haveReplicas(3))
}

// An idle ModelBox costs no writes: reconciles caused by unrelated changes
// compare what Deckhand owns with what it wants and stop there.
func TestIdleModelBoxWritesNothing(t *testing.T) {
	g, box, key := startSeedBox(t, 30014, func(box *modelv1.ModelBox) {
		box.Spec.Replicas = nil
		box.Spec.Size = modelv1.SizeCustom
		box.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000m")}}
		box.Spec.Autoscaling = &modelv1.Autoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 3}
		box.Spec.Envs = []corev1.EnvVar{{Name: "A", Value: "b"}}
		// A port without a protocol: the apiserver defaults it to TCP.
		box.Spec.Sidecars = []corev1.Container{{Name: "log", Image: "busybox", Args: []string{"sleep", "1d"}, Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9100}}}}
		box.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
		// A probe on a named port: the port of that name.
		box.Spec.Ports[0].Name = "http"
		box.Spec.Probes = &modelv1.Probes{Readiness: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}}}}
	})

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
	g.Eventually(deckhandOwnsReplicas(key)).Should(BeFalse())
	var settled []string
	g.Eventually(func() (bool, error) {
		now, err := versions()
		same := slices.Equal(now, settled)
		settled = now
		return same, err
	}).WithPolling(time.Second).Should(BeTrue())

	reconcilesOfModelBoxes := map[string]string{"controller": modelboxcontroller.ControllerName}
	writes := metric(g, "deckhand_modelbox_child_writes_total", nil)
	reconciles := metric(g, "controller_runtime_reconcile_total", reconcilesOfModelBoxes)

	// No hot loop: left alone, nothing reconciles.
	g.Consistently(testenv.Metric).WithArguments("controller_runtime_reconcile_total", reconcilesOfModelBoxes).
		WithTimeout(3 * time.Second).Should(Equal(reconciles))

	// Wake the controller three times with changes that need no child write.
	for i := range 3 {
		g.Expect(env.Update(box, func() { box.Annotations = map[string]string{"touch": fmt.Sprint(i)} })).To(Succeed())
	}
	g.Eventually(testenv.Metric).WithArguments("controller_runtime_reconcile_total", reconcilesOfModelBoxes).
		Should(BeNumerically(">", reconciles))
	g.Expect(metric(g, "deckhand_modelbox_child_writes_total", nil)).To(Equal(writes))
	now, err := versions()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(now[:len(children)]).To(Equal(settled[:len(children)]), "children's resource versions")
}

func TestForeignObjectIsNotTakenOver(t *testing.T) {
	g, ns := testenv.NewG(t), env.Namespace(t)
	env.StartManager(t, env.ManagerOptions())
	mine := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "modelbox-sample"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}},
	}
	env.Create(t, mine)
	box := seedBox(ns, 30015)
	env.Create(t, box)
	g.Eventually(get(client.ObjectKeyFromObject(box), box)).Should(HaveField("Status.Conditions", And(
		testenv.HaveCondition(modelv1.ConditionDegraded, metav1.ConditionTrue, modelv1.ReasonApplyFailed),
		ContainElement(HaveField("Message", ContainSubstring("Service "+ns+"/modelbox-sample exists and is not controlled by this ModelBox"))))))
	g.Expect(get(client.ObjectKeyFromObject(mine), &corev1.Service{})()).To(And(
		HaveField("OwnerReferences", BeEmpty()),
		HaveField("Spec.Ports", ConsistOf(HaveField("Port", BeEquivalentTo(443))))))
	// The Deployment is still made.
	g.Eventually(env.Exists(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: box.Name}})).Should(BeTrue())
}

// A ModelBox's metric series go with it.
func TestDeletedModelBoxLeavesNoMetricSeries(t *testing.T) {
	g, box, key := startSeedBox(t, 30016, nil)
	ns := key.Namespace
	series := map[string]string{"namespace": ns, "modelbox": box.Name}
	g.Eventually(testenv.MetricSeries).WithArguments("deckhand_modelbox_child_writes_total", series).Should(BeNumerically(">=", 3))
	g.Expect(testenv.Metric("deckhand_modelbox_child_writes_total",
		map[string]string{"namespace": ns, "modelbox": box.Name, "kind": "Deployment", "outcome": "created"})).To(BeEquivalentTo(1))

	g.Expect(env.Client.Delete(ctx, box)).To(Succeed())
	g.Eventually(testenv.MetricSeries).WithArguments("deckhand_modelbox_child_writes_total", series).Should(BeZero())
}

// metric reads a counter now, failing the test if it cannot.
func metric(g Gomega, name string, labels map[string]string) float64 {
	v, err := testenv.Metric(name, labels)
	g.Expect(err).NotTo(HaveOccurred())
	return v
}

// scaleDeployment sets the Deployment's replicas through its scale
// subresource, as the HorizontalPodAutoscaler and kubectl scale do.
func scaleDeployment(g Gomega, key client.ObjectKey, n int32) {
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: n}}
	g.Expect(env.Client.SubResource("scale").Update(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}},
		client.WithSubResourceBody(scale), client.FieldOwner("horizontal-pod-autoscaler"))).To(Succeed())
}

// setDeploymentAvailable writes the status the Deployment controller would.
func setDeploymentAvailable(g Gomega, d *appsv1.Deployment, n int32) {
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
	d.Status = availableStatus(d, n)
	g.Expect(env.Client.Status().Update(ctx, d)).To(Succeed())
}

// availableStatus is the status of d with n pods, all available.
func availableStatus(d *appsv1.Deployment, n int32) appsv1.DeploymentStatus {
	return appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation,
		Replicas:           n, ReadyReplicas: n, UpdatedReplicas: n, AvailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		},
	}
}

// deckhandOwnsReplicas reports whether Deckhand's field manager owns the
// Deployment's spec.replicas.
func deckhandOwnsReplicas(key client.ObjectKey) func() (bool, error) {
	return func() (bool, error) {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, key, d); err != nil {
			return false, err
		}
		for _, m := range d.ManagedFields {
			if m.Manager == modelboxcontroller.FieldManager && m.Operation == metav1.ManagedFieldsOperationApply && m.FieldsV1 != nil &&
				strings.Contains(m.FieldsV1.GetRawString(), `"f:replicas"`) {
				return true, nil
			}
		}
		return false, nil
	}
}

// Turning autoscaling off hands the count back without a drop: the
// Deployment keeps what the autoscaler left until the user sets replicas.
func TestAutoscalingOffKeepsTheReplicaCount(t *testing.T) {
	g, box, key := startSeedBox(t, 30017, autoscaled(2, 10))
	g.Eventually(get(key, &appsv1.Deployment{})).Should(haveReplicas(2))
	g.Eventually(deckhandOwnsReplicas(key)).Should(BeFalse())
	scaleDeployment(g, key, 8) // as the autoscaler would

	g.Expect(env.Update(box, func() { box.Spec.Autoscaling = nil })).To(Succeed())
	g.Eventually(gone(key, &autoscalingv2.HorizontalPodAutoscaler{})).Should(BeTrue())
	// The pass that deleted the autoscaler applied the Deployment before it
	// wrote this status.
	g.Eventually(get(key, box)).Should(HaveField("Status.ObservedGeneration", box.Generation))
	g.Expect(get(key, &appsv1.Deployment{})()).To(haveReplicas(8))
	// Eight pods: the disruption budget stays.
	g.Expect(env.Exists(&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})()).To(BeTrue())

	// Once the user sets replicas, Deckhand keeps the Deployment at it.
	g.Expect(env.Update(box, func() { box.Spec.Replicas = ptr.To[int32](3) })).To(Succeed())
	g.Eventually(get(key, &appsv1.Deployment{})).Should(haveReplicas(3))
	g.Eventually(deckhandOwnsReplicas(key)).Should(BeTrue())
}

// A labelled object that this ModelBox does not control and does not want
// (a Service left by kubectl delete --cascade=orphan of an earlier ModelBox
// of that name) is left alone and does not make the ModelBox Degraded.
func TestUnwantedChildOfAnotherOwnerIsNotDegraded(t *testing.T) {
	orphan := &corev1.Service{}
	g, box, key := startSeedBox(t, 30018, func(box *modelv1.ModelBox) {
		box.Spec.Ports = nil // no Service wanted
		orphan.ObjectMeta = metav1.ObjectMeta{Namespace: box.Namespace, Name: box.Name,
			Labels: map[string]string{modelboxcontroller.LabelModelBox: box.Name}}
		orphan.Spec.Ports = []corev1.ServicePort{{Port: 80}}
		env.Create(t, orphan)
	})
	g.Eventually(get(key, box)).Should(HaveField("Status", And(
		HaveField("ObservedGeneration", box.Generation),
		HaveField("Conditions", testenv.HaveCondition(modelv1.ConditionDegraded, metav1.ConditionFalse, modelv1.ReasonAsExpected)))))
	g.Expect(get(key, &corev1.Service{})()).To(And(HaveField("UID", orphan.UID), HaveField("OwnerReferences", BeEmpty())))
}

// Seed 003's ServicePorts: a targetPort may name a port, and the
// Deployment waits minReadySeconds (3 by default, as in the seed).
func TestNamedTargetPortAndMinReadySeconds(t *testing.T) {
	g, box, key := startSeedBox(t, 30019, func(box *modelv1.ModelBox) {
		box.Spec.Ports = []modelv1.ServicePort{
			{Name: "web", Port: 80, TargetPort: ptr.To(intstr.FromString("http")), NodePort: 30019},
			{Name: "http", Port: 8080},
		}
	})
	g.Eventually(get(key, &corev1.Service{})).Should(HaveField("Spec.Ports", ContainElement(And(
		HaveField("Name", "web"), HaveField("TargetPort", intstr.FromString("http"))))))
	g.Eventually(get(key, &appsv1.Deployment{})).Should(HaveField("Spec", And(
		HaveField("MinReadySeconds", BeEquivalentTo(3)),
		HaveField("Template.Spec.Containers", ConsistOf(HaveField("Ports", ConsistOf(And(
			HaveField("Name", "http"), HaveField("ContainerPort", BeEquivalentTo(8080))))))))))
	g.Expect(env.Update(box, func() { box.Spec.MinReadySeconds = ptr.To[int32](0) })).To(Succeed())
	g.Eventually(get(key, &appsv1.Deployment{})).Should(HaveField("Spec.MinReadySeconds", BeEquivalentTo(0)))
	g.Eventually(get(key, box)).Should(HaveField("Status", And(
		HaveField("ObservedGeneration", box.Generation),
		HaveField("Conditions", testenv.HaveCondition(modelv1.ConditionDegraded, metav1.ConditionFalse, modelv1.ReasonAsExpected)))))
}

// The pass that creates a ModelBox's children saw none of them: a status
// from it would say the Deployment is missing, one write too many for a
// state that never was. The first status comes from a pass that sees them.
func TestStatusNeverSaysAChildItCreatedIsMissing(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(ctx, &modelv1.ModelBoxList{}, client.InNamespace(ns))
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()

	env.StartManager(t, env.ManagerOptions())
	box := seedBox(ns, 30021)
	env.Create(t, box)

	var reasons []string
	g.Eventually(func() []string {
		for {
			select {
			case e := <-w.ResultChan():
				if b, ok := e.Object.(*modelv1.ModelBox); ok {
					if c := meta.FindStatusCondition(b.Status.Conditions, modelv1.ConditionAvailable); c != nil {
						reasons = append(reasons, c.Reason)
					}
				}
			default:
				return reasons
			}
		}
	}).Should(ContainElement(modelv1.ReasonReplicasUnavailable)) // no Deployment controller in envtest
	g.Expect(reasons).NotTo(ContainElement(modelv1.ReasonDeploymentMissing))
}

// A child whose ModelBox label someone removed drops out of the manager's
// cache (it holds only labelled children): the ModelBox still finds it,
// its own, and puts the label back.
func TestChildWithoutItsLabelGetsItBack(t *testing.T) {
	g, _, key := startSeedBox(t, 30022, nil)
	svc := &corev1.Service{}
	g.Eventually(get(key, svc)).Should(HaveField("ObjectMeta.Labels", HaveKey(modelboxcontroller.LabelModelBox)))
	g.Expect(env.Update(svc, func() { delete(svc.Labels, modelboxcontroller.LabelModelBox) })).To(Succeed())
	g.Eventually(get(key, &corev1.Service{})).Should(HaveField("ObjectMeta.Labels", HaveKey(modelboxcontroller.LabelModelBox)))
}
