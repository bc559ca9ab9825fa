package podbugger_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	podbuggercontroller "github.com/deckhand-dev/deckhand/internal/controller/podbugger"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

const image = "docker.io/library/busybox:1.37"

var (
	ctx = context.Background()
	// web selects the pods the tests debug.
	web = map[string]string{"app": "web"}
)

// options runs only the PodBugger controller, allowing busybox images.
func options() manager.Options {
	o := env.ManagerOptions()
	o.Controllers = []string{podbuggercontroller.ControllerName}
	o.PodBuggerAllowedImages = []string{"docker.io/library/busybox:*"}
	return o
}

// debugWeb1 runs the controller, creates the running pod web-1 in an
// opted-in namespace and the PodBugger web-debug, changed by change, that
// selects it.
func debugWeb1(t *testing.T, change func(*debugv1beta1.PodBugger)) (ns string, web1 *corev1.Pod, pb *debugv1beta1.PodBugger) {
	t.Helper()
	ns = enabledNamespace(t)
	env.StartManager(t, options())
	web1 = pod(t, ns, "web-1", web, true)
	pb = podBugger(ns, "web-debug", web)
	change(pb)
	env.Create(t, pb)
	return ns, web1, pb
}

func enabledNamespace(t *testing.T) string {
	return env.NamespaceWithLabels(t, map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})
}

// pod creates a pod with one container, "app"; running sets its phase to
// Running, as a kubelet would (envtest has none).
func pod(t *testing.T, ns, name string, labels map[string]string, running bool) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatalf("creating pod %s: %v", name, err)
	}
	if running {
		setRunning(t, p)
	}
	return p
}

func setRunning(t *testing.T, p *corev1.Pod) {
	t.Helper()
	p.Status.Phase = corev1.PodRunning
	if err := env.Client.Status().Update(ctx, p); err != nil {
		t.Fatalf("setting pod %s running: %v", p.Name, err)
	}
}

func podBugger(ns, name string, selector map[string]string) *debugv1beta1.PodBugger {
	return &debugv1beta1.PodBugger{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: debugv1beta1.PodBuggerSpec{
			Selector: metav1.LabelSelector{MatchLabels: selector},
			Image:    image,
		},
	}
}

// ephemeral returns the names of a pod's ephemeral containers as the
// apiserver holds them.
func ephemeral(ns, name string) func() ([]string, error) {
	return func() ([]string, error) {
		p := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
			return nil, err
		}
		var names []string
		for _, c := range p.Spec.EphemeralContainers {
			names = append(names, c.Name)
		}
		return names, nil
	}
}

// status returns a PodBugger's status as the apiserver holds it.
func status(pb *debugv1beta1.PodBugger) func() (debugv1beta1.PodBuggerStatus, error) {
	return func() (debugv1beta1.PodBuggerStatus, error) {
		got := &debugv1beta1.PodBugger{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(pb), got)
		return got.Status, err
	}
}

func installed(n int) types.GomegaMatcher { return HaveField("Installed", int32(n)) }

// condition matches a status with the condition typ at st for reason.
func condition(typ string, st metav1.ConditionStatus, reason string) types.GomegaMatcher {
	return HaveField("Conditions", testenv.HaveCondition(typ, st, reason))
}

func TestMatchingRunningPodsGetOneContainerEach(t *testing.T) {
	g := testenv.NewG(t)
	ns := enabledNamespace(t)
	env.StartManager(t, options())

	pod(t, ns, "web-1", web, true)
	pending := pod(t, ns, "web-2", web, false)
	pod(t, ns, "db", map[string]string{"app": "db"}, true)
	pb := podBugger(ns, "web-debug", web)
	g.Expect(env.Client.Create(ctx, pb)).To(Succeed())

	g.Eventually(ephemeral(ns, "web-1")).Should(Equal([]string{"web-debug"}))
	g.Eventually(status(pb)).Should(And(installed(1),
		condition(debugv1beta1.ConditionReady, metav1.ConditionTrue, debugv1beta1.ReasonActive),
		condition(debugv1beta1.ConditionBlocked, metav1.ConditionFalse, debugv1beta1.ReasonAllowed),
		HaveField("Pods", ConsistOf(HaveField("Name", "web-1"))),
		HaveField("ObservedGeneration", pb.Generation)))
	g.Expect(ephemeral(ns, "web-2")()).To(BeEmpty(), "a pending pod waits")
	g.Expect(ephemeral(ns, "db")()).To(BeEmpty(), "a pod the selector does not match")

	// The container follows the restricted profile.
	got := &corev1.Pod{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-1"}, got)).To(Succeed())
	c := got.Spec.EphemeralContainers[0]
	g.Expect(c.Image).To(Equal(image))
	g.Expect(c.SecurityContext).To(HaveValue(And(
		HaveField("RunAsNonRoot", HaveValue(BeTrue())),
		HaveField("AllowPrivilegeEscalation", HaveValue(BeFalse())),
		HaveField("Privileged", HaveValue(BeFalse())),
		HaveField("Capabilities.Drop", ConsistOf(corev1.Capability("ALL"))),
		HaveField("SeccompProfile.Type", corev1.SeccompProfileTypeRuntimeDefault))))

	// A pod that starts later gets it too; the first one keeps exactly one.
	setRunning(t, pending)
	g.Eventually(ephemeral(ns, "web-2")).Should(Equal([]string{"web-debug"}))
	g.Eventually(status(pb)).Should(installed(2))
	g.Consistently(ephemeral(ns, "web-1")).Should(Equal([]string{"web-debug"}))
}

func TestOncePerPodUIDAcrossManagerRestart(t *testing.T) {
	g := testenv.NewG(t)
	ns := enabledNamespace(t)
	_, stop := env.StartManager(t, options())

	pod(t, ns, "web-1", web, true)
	pb := podBugger(ns, "web-debug", web)
	g.Expect(env.Client.Create(ctx, pb)).To(Succeed())
	g.Eventually(ephemeral(ns, "web-1")).Should(Equal([]string{"web-debug"}))
	g.Eventually(status(pb)).Should(installed(1))
	stop()

	// Forget everything the first manager wrote: the pod itself is the record.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pb), pb)).To(Succeed())
	pb.Status = debugv1beta1.PodBuggerStatus{}
	g.Expect(env.Client.Status().Update(ctx, pb)).To(Succeed())

	env.StartManager(t, options())
	g.Eventually(status(pb)).Should(And(installed(1), HaveField("Pods", HaveLen(1)),
		condition(debugv1beta1.ConditionReady, metav1.ConditionTrue, debugv1beta1.ReasonActive)))
	g.Consistently(ephemeral(ns, "web-1")).Should(Equal([]string{"web-debug"}))
	g.Consistently(status(pb)).Should(condition(debugv1beta1.ConditionReady, metav1.ConditionTrue, debugv1beta1.ReasonActive))

	// A new pod of the same name is a new UID: it gets a container of its own.
	old := &corev1.Pod{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-1"}, old)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, old)).To(Succeed())
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(old), &corev1.Pod{})
	}).Should(WithTransform(func(err error) bool { return err != nil && strings.Contains(err.Error(), "not found") }, BeTrue()))
	renewed := pod(t, ns, "web-1", web, true)
	g.Expect(renewed.UID).NotTo(Equal(old.UID))
	g.Eventually(ephemeral(ns, "web-1")).Should(Equal([]string{"web-debug"}))
	g.Eventually(status(pb)).Should(And(installed(1),
		HaveField("Pods", ConsistOf(HaveField("UID", string(renewed.UID))))))
}

func TestMaxPodsCapsCarriers(t *testing.T) {
	g := testenv.NewG(t)
	ns := enabledNamespace(t)
	env.StartManager(t, options())
	for _, name := range []string{"web-1", "web-2", "web-3"} {
		pod(t, ns, name, web, true)
	}
	pb := podBugger(ns, "web-debug", web)
	pb.Spec.MaxPods = 2
	g.Expect(env.Client.Create(ctx, pb)).To(Succeed())

	g.Eventually(status(pb)).Should(And(installed(2),
		condition(debugv1beta1.ConditionReady, metav1.ConditionTrue, debugv1beta1.ReasonMaxPodsReached)))
	carriers := func() (int, error) {
		n := 0
		for _, name := range []string{"web-1", "web-2", "web-3"} {
			names, err := ephemeral(ns, name)()
			if err != nil {
				return 0, err
			}
			n += len(names)
		}
		return n, nil
	}
	g.Consistently(carriers).Should(Equal(2))
	g.Expect(status(pb)()).To(installed(2))

	// One Event for the pass, naming both pods: not an API write per pod.
	injected := func() ([]string, error) {
		evs, err := env.Events(ns, pb)()
		return slices.DeleteFunc(evs, func(e string) bool { return !strings.HasPrefix(e, podbuggercontroller.EventInjected+":") }), err
	}
	g.Eventually(injected).Should(ConsistOf(MatchRegexp(`^Injected: Added ephemeral container web-debug \(image .+\) to 2 pods: web-\d, web-\d$`)))
}

func TestSuspendStopsNewInjections(t *testing.T) {
	g := testenv.NewG(t)
	ns, _, pb := debugWeb1(t, func(pb *debugv1beta1.PodBugger) { pb.Spec.Suspend = true })
	g.Eventually(status(pb)).Should(And(installed(0),
		condition(debugv1beta1.ConditionReady, metav1.ConditionTrue, debugv1beta1.ReasonSuspended)))
	g.Consistently(ephemeral(ns, "web-1")).Should(BeEmpty())

	g.Expect(env.Update(pb, func() { pb.Spec.Suspend = false })).To(Succeed())
	g.Eventually(ephemeral(ns, "web-1")).Should(Equal([]string{"web-debug"}))

	// Suspended again: the container stays (it cannot be removed), a new pod gets none.
	g.Expect(env.Update(pb, func() { pb.Spec.Suspend = true })).To(Succeed())
	g.Eventually(status(pb)).Should(condition(debugv1beta1.ConditionReady, metav1.ConditionTrue, debugv1beta1.ReasonSuspended))
	pod(t, ns, "web-2", web, true)
	g.Consistently(ephemeral(ns, "web-2")).Should(BeEmpty())
	g.Expect(status(pb)()).To(installed(1))
}

func TestNamespaceMustOptIn(t *testing.T) {
	g := testenv.NewG(t)
	env.StartManager(t, options())

	// Refused at admission, naming the field.
	plain := env.Namespace(t)
	err := env.Client.Create(ctx, podBugger(plain, "web-debug", web))
	g.Expect(err).To(MatchError(And(ContainSubstring("metadata.namespace"), ContainSubstring(debugv1beta1.NamespaceEnabledLabel))))

	// Enforced by the controller when the label goes away after admission.
	ns := enabledNamespace(t)
	pod(t, ns, "web-1", web, true)
	pb := podBugger(ns, "web-debug", web)
	g.Expect(env.Client.Create(ctx, pb)).To(Succeed())
	g.Eventually(ephemeral(ns, "web-1")).Should(HaveLen(1))

	setNamespaceLabel(t, ns, "false")
	g.Eventually(status(pb)).Should(And(
		condition(debugv1beta1.ConditionBlocked, metav1.ConditionTrue, debugv1beta1.ReasonNamespaceNotEnabled),
		condition(debugv1beta1.ConditionReady, metav1.ConditionFalse, debugv1beta1.ReasonNamespaceNotEnabled)))
	pod(t, ns, "web-2", web, true)
	g.Consistently(ephemeral(ns, "web-2")).Should(BeEmpty())

	setNamespaceLabel(t, ns, "true")
	g.Eventually(ephemeral(ns, "web-2")).Should(Equal([]string{"web-debug"}))
	g.Eventually(status(pb)).Should(And(installed(2),
		condition(debugv1beta1.ConditionBlocked, metav1.ConditionFalse, debugv1beta1.ReasonAllowed)))
}

func setNamespaceLabel(t *testing.T, name, value string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Update(ns, func() { ns.Labels[debugv1beta1.NamespaceEnabledLabel] = value }); err != nil {
		t.Fatal(err)
	}
}

func TestImageAllowList(t *testing.T) {
	g := testenv.NewG(t)
	ns := enabledNamespace(t)
	_, stop := env.StartManager(t, options())

	// Refused at admission, naming the field.
	evil := podBugger(ns, "evil", web)
	evil.Spec.Image = "docker.io/evil/busybox:1.37"
	g.Expect(env.Client.Create(ctx, evil)).To(MatchError(And(ContainSubstring("spec.image"), ContainSubstring("allow-list"))))

	// Enforced by the controller when the operator narrows the list later.
	pod(t, ns, "web-1", web, true)
	pb := podBugger(ns, "web-debug", web)
	g.Expect(env.Client.Create(ctx, pb)).To(Succeed())
	g.Eventually(ephemeral(ns, "web-1")).Should(HaveLen(1))
	stop()

	narrowed := options()
	narrowed.PodBuggerAllowedImages = []string{"registry.example.com/debug/*"}
	env.StartManager(t, narrowed)
	pod(t, ns, "web-2", web, true)
	g.Eventually(status(pb)).Should(And(installed(1),
		condition(debugv1beta1.ConditionBlocked, metav1.ConditionTrue, debugv1beta1.ReasonImageNotAllowed)))
	g.Consistently(ephemeral(ns, "web-2")).Should(BeEmpty())
}

func TestGeneralProfileNeedsTheOperatorFlag(t *testing.T) {
	g := testenv.NewG(t)
	ns := enabledNamespace(t)
	_, stop := env.StartManager(t, options())
	general := podBugger(ns, "web-debug", web)
	general.Spec.Profile = debugv1beta1.ProfileGeneral

	g.Expect(env.Client.Create(ctx, general.DeepCopy())).To(MatchError(ContainSubstring("spec.profile")))
	stop()

	allowing := options()
	allowing.PodBuggerAllowGeneralProfile = true
	env.StartManager(t, allowing)
	pod(t, ns, "web-1", web, true)
	g.Expect(env.Client.Create(ctx, general)).To(Succeed())
	g.Eventually(ephemeral(ns, "web-1")).Should(HaveLen(1))
	got := &corev1.Pod{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-1"}, got)).To(Succeed())
	g.Expect(got.Spec.EphemeralContainers[0].SecurityContext).To(HaveValue(And(
		HaveField("Privileged", HaveValue(BeFalse())),
		HaveField("Capabilities.Add", ConsistOf(corev1.Capability("SYS_PTRACE"))))))
}

func TestTargetContainerMustExist(t *testing.T) {
	g := testenv.NewG(t)
	ns := enabledNamespace(t)
	env.StartManager(t, options())

	pod(t, ns, "web-1", web, true) // its container is "app"
	pb := podBugger(ns, "web-debug", web)
	pb.Spec.TargetContainerName = "nginx"
	g.Expect(env.Client.Create(ctx, pb)).To(Succeed())

	g.Eventually(env.Events(ns, pb)).Should(ContainElement(
		podbuggercontroller.EventTargetContainerNotFound + ": Pod web-1 skipped: pod has no container named nginx (spec.targetContainerName)"))
	g.Consistently(ephemeral(ns, "web-1")).Should(BeEmpty())

	g.Expect(env.Update(pb, func() { pb.Spec.TargetContainerName = "app" })).To(Succeed())
	g.Eventually(ephemeral(ns, "web-1")).Should(HaveLen(1))
	got := &corev1.Pod{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-1"}, got)).To(Succeed())
	g.Expect(got.Spec.EphemeralContainers[0].TargetContainerName).To(Equal("app"))
}

func TestLongNamesGiveValidContainerNames(t *testing.T) {
	g := testenv.NewG(t)
	ns := enabledNamespace(t)
	env.StartManager(t, options())

	pod(t, ns, "web-1", web, true)
	name := "incident-4711.web-tier." + strings.Repeat("x", 80)
	g.Expect(env.Client.Create(ctx, podBugger(ns, name, web))).To(Succeed())
	g.Eventually(ephemeral(ns, "web-1")).Should(Equal([]string{policy.ContainerName(name)}))
	g.Expect(len(policy.ContainerName(name))).To(BeNumerically("<=", 63))
}

// The kubelet's report of the debug container is in status: a container that
// could not start (here the kubelet refuses a root image under
// runAsNonRoot) is Failed with the kubelet's reason, and Started says so.
// envtest has no kubelet: the test writes the pod's status as one would.
func TestStatusReportsADebuggerThatCouldNotStart(t *testing.T) {
	g := testenv.NewG(t)
	ns, p, pb := debugWeb1(t, func(*debugv1beta1.PodBugger) {})
	g.Eventually(ephemeral(ns, "web-1")).Should(HaveLen(1))
	g.Eventually(status(pb)).Should(And(installed(1),
		HaveField("Pods", ConsistOf(HaveField("State", debugv1beta1.DebuggerUnknown))),
		condition(debugv1beta1.ConditionStarted, metav1.ConditionUnknown, debugv1beta1.ReasonStatusUnknown)))

	setDebuggerState := func(state corev1.ContainerState) {
		t.Helper()
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		p.Status.EphemeralContainerStatuses = []corev1.ContainerStatus{{Name: "web-debug", Image: image, State: state}}
		g.Expect(env.Client.Status().Update(ctx, p)).To(Succeed())
	}
	setDebuggerState(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason: "CreateContainerConfigError", Message: "container has runAsNonRoot and image will run as root"}})
	g.Eventually(status(pb)).Should(And(installed(1),
		HaveField("Pods", ConsistOf(And(HaveField("State", debugv1beta1.DebuggerFailed),
			HaveField("Reason", "CreateContainerConfigError"),
			HaveField("Message", "container has runAsNonRoot and image will run as root")))),
		condition(debugv1beta1.ConditionStarted, metav1.ConditionFalse, debugv1beta1.ReasonStartFailed)))

	setDebuggerState(corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}})
	g.Eventually(status(pb)).Should(And(
		HaveField("Pods", ConsistOf(HaveField("State", debugv1beta1.DebuggerRunning))),
		condition(debugv1beta1.ConditionStarted, metav1.ConditionTrue, debugv1beta1.ReasonAllStarted)))
}
