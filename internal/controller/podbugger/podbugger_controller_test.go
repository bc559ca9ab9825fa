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
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/podbuggertest"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

var ctx = context.Background()

// debugWeb1 runs the controller, creates the running pod web-1 in an
// opted-in namespace and the PodBugger web-debug, changed by change, that
// selects it.
func debugWeb1(t *testing.T, change func(*debugv1beta1.PodBugger)) (ns string, web1 *corev1.Pod, pb *debugv1beta1.PodBugger) {
	t.Helper()
	ns = podbuggertest.EnabledNamespace(t, env)
	env.StartManager(t, podbuggertest.Options(env))
	web1 = pod(t, ns, "web-1", podbuggertest.Web, true)
	pb = podbuggertest.PodBugger(ns, "web-debug", podbuggertest.Web)
	change(pb)
	env.Create(t, pb)
	return ns, web1, pb
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
		podbuggertest.SetRunning(t, env, p)
	}
	return p
}

func installed(n int) types.GomegaMatcher { return HaveField("Installed", int32(n)) }

func TestMatchingRunningPodsGetOneContainerEach(t *testing.T) {
	g := testenv.NewG(t)
	ns := podbuggertest.EnabledNamespace(t, env)
	env.StartManager(t, podbuggertest.Options(env))

	pod(t, ns, "web-1", podbuggertest.Web, true)
	pending := pod(t, ns, "web-2", podbuggertest.Web, false)
	pod(t, ns, "db", map[string]string{"app": "db"}, true)
	pb := podbuggertest.PodBugger(ns, "web-debug", podbuggertest.Web)
	g.Expect(env.Client.Create(ctx, pb)).To(Succeed())

	g.Eventually(podbuggertest.Ephemeral(env, ns, "web-1")).Should(Equal([]string{"web-debug"}))
	g.Eventually(podbuggertest.Status(env, pb)).Should(And(installed(1),
		podbuggertest.Condition(debugv1beta1.ConditionReady, metav1.ConditionTrue, debugv1beta1.ReasonActive),
		podbuggertest.Condition(debugv1beta1.ConditionBlocked, metav1.ConditionFalse, debugv1beta1.ReasonAllowed),
		HaveField("Pods", ConsistOf(HaveField("Name", "web-1"))),
		HaveField("ObservedGeneration", pb.Generation)))
	g.Expect(podbuggertest.Ephemeral(env, ns, "web-2")()).To(BeEmpty(), "a pending pod waits")
	g.Expect(podbuggertest.Ephemeral(env, ns, "db")()).To(BeEmpty(), "a pod the selector does not match")

	// The container follows the restricted profile.
	got := &corev1.Pod{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-1"}, got)).To(Succeed())
	c := got.Spec.EphemeralContainers[0]
	g.Expect(c.Image).To(Equal(podbuggertest.Image))
	g.Expect(c.SecurityContext).To(HaveValue(And(
		HaveField("RunAsNonRoot", HaveValue(BeTrue())),
		HaveField("AllowPrivilegeEscalation", HaveValue(BeFalse())),
		HaveField("Privileged", HaveValue(BeFalse())),
		HaveField("Capabilities.Drop", ConsistOf(corev1.Capability("ALL"))),
		HaveField("SeccompProfile.Type", corev1.SeccompProfileTypeRuntimeDefault))))

	// A pod that starts later gets it too; the first one keeps exactly one.
	podbuggertest.SetRunning(t, env, pending)
	g.Eventually(podbuggertest.Ephemeral(env, ns, "web-2")).Should(Equal([]string{"web-debug"}))
	g.Eventually(podbuggertest.Status(env, pb)).Should(installed(2))
	g.Consistently(podbuggertest.Ephemeral(env, ns, "web-1")).Should(Equal([]string{"web-debug"}))
}

func TestOncePerPodUIDAcrossManagerRestart(t *testing.T) {
	g := testenv.NewG(t)
	ns := podbuggertest.EnabledNamespace(t, env)
	_, stop := env.StartManager(t, podbuggertest.Options(env))

	pod(t, ns, "web-1", podbuggertest.Web, true)
	pb := podbuggertest.PodBugger(ns, "web-debug", podbuggertest.Web)
	g.Expect(env.Client.Create(ctx, pb)).To(Succeed())
	g.Eventually(podbuggertest.Ephemeral(env, ns, "web-1")).Should(Equal([]string{"web-debug"}))
	g.Eventually(podbuggertest.Status(env, pb)).Should(installed(1))
	stop()

	// Forget everything the first manager wrote: the pod itself is the record.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pb), pb)).To(Succeed())
	pb.Status = debugv1beta1.PodBuggerStatus{}
	g.Expect(env.Client.Status().Update(ctx, pb)).To(Succeed())

	env.StartManager(t, podbuggertest.Options(env))
	g.Eventually(podbuggertest.Status(env, pb)).Should(And(installed(1), HaveField("Pods", HaveLen(1)),
		podbuggertest.Condition(debugv1beta1.ConditionReady, metav1.ConditionTrue, debugv1beta1.ReasonActive)))
	g.Consistently(podbuggertest.Ephemeral(env, ns, "web-1")).Should(Equal([]string{"web-debug"}))
	g.Consistently(podbuggertest.Status(env, pb)).Should(podbuggertest.Condition(debugv1beta1.ConditionReady, metav1.ConditionTrue, debugv1beta1.ReasonActive))

	// A new pod of the same name is a new UID: it gets a container of its own.
	old := &corev1.Pod{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-1"}, old)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, old)).To(Succeed())
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(old), &corev1.Pod{})
	}).Should(WithTransform(func(err error) bool { return err != nil && strings.Contains(err.Error(), "not found") }, BeTrue()))
	renewed := pod(t, ns, "web-1", podbuggertest.Web, true)
	g.Expect(renewed.UID).NotTo(Equal(old.UID))
	g.Eventually(podbuggertest.Ephemeral(env, ns, "web-1")).Should(Equal([]string{"web-debug"}))
	g.Eventually(podbuggertest.Status(env, pb)).Should(And(installed(1),
		HaveField("Pods", ConsistOf(HaveField("UID", string(renewed.UID))))))
}

func TestMaxPodsCapsCarriers(t *testing.T) {
	g := testenv.NewG(t)
	ns := podbuggertest.EnabledNamespace(t, env)
	env.StartManager(t, podbuggertest.Options(env))
	for _, name := range []string{"web-1", "web-2", "web-3"} {
		pod(t, ns, name, podbuggertest.Web, true)
	}
	pb := podbuggertest.PodBugger(ns, "web-debug", podbuggertest.Web)
	pb.Spec.MaxPods = 2
	g.Expect(env.Client.Create(ctx, pb)).To(Succeed())

	g.Eventually(podbuggertest.Status(env, pb)).Should(And(installed(2),
		podbuggertest.Condition(debugv1beta1.ConditionReady, metav1.ConditionTrue, debugv1beta1.ReasonMaxPodsReached)))
	carriers := func() (int, error) {
		n := 0
		for _, name := range []string{"web-1", "web-2", "web-3"} {
			names, err := podbuggertest.Ephemeral(env, ns, name)()
			if err != nil {
				return 0, err
			}
			n += len(names)
		}
		return n, nil
	}
	g.Consistently(carriers).Should(Equal(2))
	g.Expect(podbuggertest.Status(env, pb)()).To(installed(2))

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
	g.Eventually(podbuggertest.Status(env, pb)).Should(And(installed(0),
		podbuggertest.Condition(debugv1beta1.ConditionReady, metav1.ConditionTrue, debugv1beta1.ReasonSuspended)))
	g.Consistently(podbuggertest.Ephemeral(env, ns, "web-1")).Should(BeEmpty())

	g.Expect(env.Update(pb, func() { pb.Spec.Suspend = false })).To(Succeed())
	g.Eventually(podbuggertest.Ephemeral(env, ns, "web-1")).Should(Equal([]string{"web-debug"}))

	// Suspended again: the container stays (it cannot be removed), a new pod gets none.
	g.Expect(env.Update(pb, func() { pb.Spec.Suspend = true })).To(Succeed())
	g.Eventually(podbuggertest.Status(env, pb)).Should(podbuggertest.Condition(debugv1beta1.ConditionReady, metav1.ConditionTrue, debugv1beta1.ReasonSuspended))
	pod(t, ns, "web-2", podbuggertest.Web, true)
	g.Consistently(podbuggertest.Ephemeral(env, ns, "web-2")).Should(BeEmpty())
	g.Expect(podbuggertest.Status(env, pb)()).To(installed(1))
}

func TestNamespaceMustOptIn(t *testing.T) {
	g := testenv.NewG(t)
	env.StartManager(t, podbuggertest.Options(env))

	// Refused at admission, naming the field.
	plain := env.Namespace(t)
	err := env.Client.Create(ctx, podbuggertest.PodBugger(plain, "web-debug", podbuggertest.Web))
	g.Expect(err).To(MatchError(And(ContainSubstring("metadata.namespace"), ContainSubstring(debugv1beta1.NamespaceEnabledLabel))))

	// Enforced by the controller when the label goes away after admission.
	ns := podbuggertest.EnabledNamespace(t, env)
	pod(t, ns, "web-1", podbuggertest.Web, true)
	pb := podbuggertest.PodBugger(ns, "web-debug", podbuggertest.Web)
	g.Expect(env.Client.Create(ctx, pb)).To(Succeed())
	g.Eventually(podbuggertest.Ephemeral(env, ns, "web-1")).Should(HaveLen(1))

	setNamespaceLabel(t, ns, "false")
	g.Eventually(podbuggertest.Status(env, pb)).Should(And(
		podbuggertest.Condition(debugv1beta1.ConditionBlocked, metav1.ConditionTrue, debugv1beta1.ReasonNamespaceNotEnabled),
		podbuggertest.Condition(debugv1beta1.ConditionReady, metav1.ConditionFalse, debugv1beta1.ReasonNamespaceNotEnabled)))
	pod(t, ns, "web-2", podbuggertest.Web, true)
	g.Consistently(podbuggertest.Ephemeral(env, ns, "web-2")).Should(BeEmpty())

	setNamespaceLabel(t, ns, "true")
	g.Eventually(podbuggertest.Ephemeral(env, ns, "web-2")).Should(Equal([]string{"web-debug"}))
	g.Eventually(podbuggertest.Status(env, pb)).Should(And(installed(2),
		podbuggertest.Condition(debugv1beta1.ConditionBlocked, metav1.ConditionFalse, debugv1beta1.ReasonAllowed)))
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
	ns := podbuggertest.EnabledNamespace(t, env)
	_, stop := env.StartManager(t, podbuggertest.Options(env))

	// Refused at admission, naming the field.
	evil := podbuggertest.PodBugger(ns, "evil", podbuggertest.Web)
	evil.Spec.Image = "docker.io/evil/busybox:1.37"
	g.Expect(env.Client.Create(ctx, evil)).To(MatchError(And(ContainSubstring("spec.image"), ContainSubstring("allow-list"))))

	// Enforced by the controller when the operator narrows the list later.
	pod(t, ns, "web-1", podbuggertest.Web, true)
	pb := podbuggertest.PodBugger(ns, "web-debug", podbuggertest.Web)
	g.Expect(env.Client.Create(ctx, pb)).To(Succeed())
	g.Eventually(podbuggertest.Ephemeral(env, ns, "web-1")).Should(HaveLen(1))
	stop()

	narrowed := podbuggertest.Options(env)
	narrowed.PodBuggerAllowedImages = []string{"registry.example.com/debug/*"}
	env.StartManager(t, narrowed)
	pod(t, ns, "web-2", podbuggertest.Web, true)
	g.Eventually(podbuggertest.Status(env, pb)).Should(And(installed(1),
		podbuggertest.Condition(debugv1beta1.ConditionBlocked, metav1.ConditionTrue, debugv1beta1.ReasonImageNotAllowed)))
	g.Consistently(podbuggertest.Ephemeral(env, ns, "web-2")).Should(BeEmpty())
}

func TestGeneralProfileNeedsTheOperatorFlag(t *testing.T) {
	g := testenv.NewG(t)
	ns := podbuggertest.EnabledNamespace(t, env)
	_, stop := env.StartManager(t, podbuggertest.Options(env))
	general := podbuggertest.PodBugger(ns, "web-debug", podbuggertest.Web)
	general.Spec.Profile = debugv1beta1.ProfileGeneral

	g.Expect(env.Client.Create(ctx, general.DeepCopy())).To(MatchError(ContainSubstring("spec.profile")))
	stop()

	allowing := podbuggertest.Options(env)
	allowing.PodBuggerAllowGeneralProfile = true
	env.StartManager(t, allowing)
	pod(t, ns, "web-1", podbuggertest.Web, true)
	g.Expect(env.Client.Create(ctx, general)).To(Succeed())
	g.Eventually(podbuggertest.Ephemeral(env, ns, "web-1")).Should(HaveLen(1))
	got := &corev1.Pod{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-1"}, got)).To(Succeed())
	g.Expect(got.Spec.EphemeralContainers[0].SecurityContext).To(HaveValue(And(
		HaveField("Privileged", HaveValue(BeFalse())),
		HaveField("Capabilities.Add", ConsistOf(corev1.Capability("SYS_PTRACE"))))))
}

func TestTargetContainerMustExist(t *testing.T) {
	g := testenv.NewG(t)
	ns := podbuggertest.EnabledNamespace(t, env)
	env.StartManager(t, podbuggertest.Options(env))

	pod(t, ns, "web-1", podbuggertest.Web, true) // its container is "app"
	pb := podbuggertest.PodBugger(ns, "web-debug", podbuggertest.Web)
	pb.Spec.TargetContainerName = "nginx"
	g.Expect(env.Client.Create(ctx, pb)).To(Succeed())

	g.Eventually(env.Events(ns, pb)).Should(ContainElement(
		podbuggercontroller.EventTargetContainerNotFound + ": Pod web-1 skipped: pod has no container named nginx (spec.targetContainerName)"))
	g.Consistently(podbuggertest.Ephemeral(env, ns, "web-1")).Should(BeEmpty())

	g.Expect(env.Update(pb, func() { pb.Spec.TargetContainerName = "app" })).To(Succeed())
	g.Eventually(podbuggertest.Ephemeral(env, ns, "web-1")).Should(HaveLen(1))
	got := &corev1.Pod{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-1"}, got)).To(Succeed())
	g.Expect(got.Spec.EphemeralContainers[0].TargetContainerName).To(Equal("app"))
}

func TestLongNamesGiveValidContainerNames(t *testing.T) {
	g := testenv.NewG(t)
	ns := podbuggertest.EnabledNamespace(t, env)
	env.StartManager(t, podbuggertest.Options(env))

	pod(t, ns, "web-1", podbuggertest.Web, true)
	name := "incident-4711.web-tier." + strings.Repeat("x", 80)
	g.Expect(env.Client.Create(ctx, podbuggertest.PodBugger(ns, name, podbuggertest.Web))).To(Succeed())
	g.Eventually(podbuggertest.Ephemeral(env, ns, "web-1")).Should(Equal([]string{policy.ContainerName(name)}))
	g.Expect(len(policy.ContainerName(name))).To(BeNumerically("<=", 63))
}

// The kubelet's report of the debug container is in status: a container that
// could not start (here the kubelet refuses a root image under
// runAsNonRoot) is Failed with the kubelet's reason, and Started says so.
// envtest has no kubelet: the test writes the pod's status as one would.
func TestStatusReportsADebuggerThatCouldNotStart(t *testing.T) {
	g := testenv.NewG(t)
	ns, p, pb := debugWeb1(t, func(*debugv1beta1.PodBugger) {})
	g.Eventually(podbuggertest.Ephemeral(env, ns, "web-1")).Should(HaveLen(1))
	g.Eventually(podbuggertest.Status(env, pb)).Should(And(installed(1),
		HaveField("Pods", ConsistOf(HaveField("State", debugv1beta1.DebuggerUnknown))),
		podbuggertest.Condition(debugv1beta1.ConditionStarted, metav1.ConditionUnknown, debugv1beta1.ReasonStatusUnknown)))

	setDebuggerState := func(state corev1.ContainerState) {
		t.Helper()
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		p.Status.EphemeralContainerStatuses = []corev1.ContainerStatus{{Name: "web-debug", Image: podbuggertest.Image, State: state}}
		g.Expect(env.Client.Status().Update(ctx, p)).To(Succeed())
	}
	setDebuggerState(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason: "CreateContainerConfigError", Message: "container has runAsNonRoot and image will run as root"}})
	g.Eventually(podbuggertest.Status(env, pb)).Should(And(installed(1),
		HaveField("Pods", ConsistOf(And(HaveField("State", debugv1beta1.DebuggerFailed),
			HaveField("Reason", "CreateContainerConfigError"),
			HaveField("Message", "container has runAsNonRoot and image will run as root")))),
		podbuggertest.Condition(debugv1beta1.ConditionStarted, metav1.ConditionFalse, debugv1beta1.ReasonStartFailed)))

	setDebuggerState(corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}})
	g.Eventually(podbuggertest.Status(env, pb)).Should(And(
		HaveField("Pods", ConsistOf(HaveField("State", debugv1beta1.DebuggerRunning))),
		podbuggertest.Condition(debugv1beta1.ConditionStarted, metav1.ConditionTrue, debugv1beta1.ReasonAllStarted)))
}
