//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

// TestPodBugger runs the operator with busybox allowed and checks, on kwok
// nodes, that the pods of a Deployment each get exactly one debug container,
// that pods of a scale-up get theirs, and that the safety rules hold.
func TestPodBugger(t *testing.T) {
	ctx := context.Background()
	enabled := map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"}
	p := c.RunManager(t, "--controllers", "podbugger", "--podbugger-allowed-images", "docker.io/library/busybox:*")
	web := map[string]string{"app": "web"}
	// The manager serves the webhook once a dry run passes it.
	probe := pbObject(c.Namespace(t, enabled), "probe", web, debugv1beta1.ProfileRestricted)
	NewWithT(t).Eventually(func() error { return c.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll) }).
		WithTimeout(time.Minute).Should(Succeed())

	t.Run("each pod of a Deployment gets one container, also after a scale-up", func(t *testing.T) {
		g := pbG(t)
		ns := c.Namespace(t, enabled)
		pbDeployment(t, ns, 3)
		g.Eventually(pbRunningPods).WithArguments(ns).Should(HaveLen(3))

		pb := pbObject(ns, "web-debug", web, debugv1beta1.ProfileRestricted)
		start := time.Now()
		g.Expect(c.Client.Create(ctx, pb)).To(Succeed())
		g.Eventually(pbStatus).WithArguments(pb).Should(HaveField("Installed", int32(3)))
		t.Logf("installed: 3 after %s", time.Since(start).Round(time.Millisecond))
		g.Expect(pbEphemeralByPod(ns)).To(And(HaveLen(3), HaveEach(Equal([]string{"web-debug"}))))
		// kwok reports no ephemeral container status: the PodBugger says it does not know.
		g.Eventually(pbStatus).WithArguments(pb).Should(And(
			HaveField("Pods", HaveEach(HaveField("State", debugv1beta1.DebuggerUnknown))),
			HaveField("Conditions", ContainElement(And(HaveField("Type", debugv1beta1.ConditionStarted),
				HaveField("Status", metav1.ConditionUnknown), HaveField("Reason", debugv1beta1.ReasonStatusUnknown))))))

		start = time.Now()
		g.Expect(c.Kubectl("scale", "deployment/web", "-n", ns, "--replicas=5")).Error().NotTo(HaveOccurred())
		g.Eventually(pbStatus).WithArguments(pb).Should(And(
			HaveField("Installed", int32(5)), HaveField("Pods", HaveLen(5))))
		t.Logf("installed: 5 after %s from the scale-up", time.Since(start).Round(time.Millisecond))
		g.Consistently(pbEphemeralByPod).WithArguments(ns).Should(And(HaveLen(5), HaveEach(Equal([]string{"web-debug"}))))
		g.Expect(c.Kubectl("get", "podbugger", "-n", ns, "web-debug")).To(MatchRegexp(`web-debug\s+docker.io/library/busybox:1.37\s+restricted\s+5\s+10\s+True\s+Active`))
		g.Expect(p.Exited()).To(BeFalse())
	})

	t.Run("pods of a namespace without the opt-in get none", func(t *testing.T) {
		g := pbG(t)
		// A PodBugger selecting app=web in an opted-in namespace...
		other := c.Namespace(t, enabled)
		g.Expect(c.Client.Create(ctx, pbObject(other, "web-debug", web, debugv1beta1.ProfileRestricted))).To(Succeed())
		// ...leaves the app=web pods of this namespace alone, and none can be created here.
		ns := c.Namespace(t, nil)
		pbDeployment(t, ns, 2)
		g.Eventually(pbRunningPods).WithArguments(ns).Should(HaveLen(2))
		err := c.Client.Create(ctx, pbObject(ns, "web-debug", web, debugv1beta1.ProfileRestricted))
		g.Expect(err).To(MatchError(ContainSubstring("metadata.namespace")))
		g.Consistently(pbEphemeralByPod).WithArguments(ns).Should(And(HaveLen(2), HaveEach(BeEmpty())))
	})

	t.Run("a restricted namespace accepts the restricted profile only", func(t *testing.T) {
		g := pbG(t)
		ns := c.Namespace(t, map[string]string{
			debugv1beta1.NamespaceEnabledLabel:   "true",
			"pod-security.kubernetes.io/enforce": "restricted",
		})
		pbDeployment(t, ns, 2)
		g.Eventually(pbRunningPods).WithArguments(ns).Should(HaveLen(2))

		restricted := pbObject(ns, "restricted-debug", web, debugv1beta1.ProfileRestricted)
		g.Expect(c.Client.Create(ctx, restricted)).To(Succeed())
		g.Eventually(pbStatus).WithArguments(restricted).Should(And(HaveField("Installed", int32(2)),
			WithTransform(pbReadyReason, Equal(debugv1beta1.ReasonActive))))

		// Pod Security checks ephemeral containers too: baseline's root
		// container is refused, and the PodBugger says so.
		baseline := pbObject(ns, "baseline-debug", web, debugv1beta1.ProfileBaseline)
		g.Expect(c.Client.Create(ctx, baseline)).To(Succeed())
		g.Eventually(pbStatus).WithArguments(baseline).Should(And(HaveField("Installed", int32(0)),
			WithTransform(pbReadyReason, Equal(debugv1beta1.ReasonInjectionFailed))))
		g.Expect(pbEphemeralByPod(ns)).To(HaveEach(Equal([]string{"restricted-debug"})))
	})

	t.Run("the sample is accepted in an opted-in namespace", func(t *testing.T) {
		g := pbG(t)
		ns := c.Namespace(t, enabled)
		sample := filepath.Join("..", "..", "config", "samples", "debug_v1beta1_podbugger.yaml")
		g.Expect(c.Kubectl("apply", "--dry-run=server", "-n", ns, "-f", sample)).
			To(ContainSubstring("podbugger.debug.deckhand.dev/web-debug created (server dry run)"))
	})

	t.Run("a disallowed image is refused at admission naming the field", func(t *testing.T) {
		g := pbG(t)
		ns := c.Namespace(t, enabled)
		manifest := filepath.Join(t.TempDir(), "pb.yaml")
		g.Expect(os.WriteFile(manifest, []byte(fmt.Sprintf(`apiVersion: debug.deckhand.dev/v1alpha1
kind: PodBugger
metadata:
  name: evil
  namespace: %s
spec:
  selector:
    matchLabels:
      app: web
  image: docker.io/evil/busybox:1.37
`, ns)), 0o600)).To(Succeed())
		_, err := c.Kubectl("apply", "-f", manifest)
		// The webhook's answer, as kubectl shows it: only the webhook knows the allow-list.
		g.Expect(err).To(MatchError(And(ContainSubstring(`The PodBugger "evil" is invalid: spec.image: Forbidden`),
			ContainSubstring(`"docker.io/evil/busybox:1.37" is not on the operator's allow-list`))))
		g.Expect(c.Kubectl("get", "podbugger", "-n", ns, "evil")).Error().To(MatchError(ContainSubstring("NotFound")))
	})
}

func pbG(t *testing.T) *WithT {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
	g.SetDefaultConsistentlyDuration(3 * time.Second)
	return g
}

func pbObject(ns, name string, selector map[string]string, profile debugv1beta1.Profile) *debugv1beta1.PodBugger {
	return &debugv1beta1.PodBugger{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: debugv1beta1.PodBuggerSpec{
			Selector: metav1.LabelSelector{MatchLabels: selector},
			Image:    "docker.io/library/busybox:1.37",
			Profile:  profile,
		},
	}
}

// pbDeployment creates the Deployment "web" (pods labelled app=web) whose pods
// pass the Pod Security restricted level.
func pbDeployment(t *testing.T, ns string, replicas int32) {
	t.Helper()
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:  "web",
						Image: "registry.k8s.io/pause:3.10",
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
				},
			},
		},
	}
	if err := c.Client.Create(context.Background(), d); err != nil {
		t.Fatalf("creating deployment: %v", err)
	}
}

func pbListPods(ns string) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	err := c.Client.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{"app": "web"})
	return pods.Items, err
}

func pbRunningPods(ns string) ([]string, error) {
	pods, err := pbListPods(ns)
	var names []string
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning {
			names = append(names, p.Name)
		}
	}
	return names, err
}

// pbEphemeralByPod maps each app=web pod of ns to its ephemeral containers' names.
func pbEphemeralByPod(ns string) (map[string][]string, error) {
	pods, err := pbListPods(ns)
	out := map[string][]string{}
	for _, p := range pods {
		out[p.Name] = []string{}
		for _, e := range p.Spec.EphemeralContainers {
			out[p.Name] = append(out[p.Name], e.Name)
		}
	}
	return out, err
}

func pbStatus(pb *debugv1beta1.PodBugger) (debugv1beta1.PodBuggerStatus, error) {
	got := &debugv1beta1.PodBugger{}
	err := c.Client.Get(context.Background(), client.ObjectKeyFromObject(pb), got)
	return got.Status, err
}

func pbReadyReason(s debugv1beta1.PodBuggerStatus) string {
	if cond := meta.FindStatusCondition(s.Conditions, debugv1beta1.ConditionReady); cond != nil {
		return cond.Reason
	}
	return ""
}
