//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	modelboxcontroller "github.com/deckhand-dev/deckhand/internal/controller/modelbox"
	"github.com/deckhand-dev/deckhand/test/cluster"
)

// Pods on the real node pull nothing (the images are imported), start real
// processes and get addresses from the node's own CNI bridge.
const (
	realNodeWait = 2 * time.Minute
	podSubnet    = "172.29.0.0/16" // hack/realnode.sh
	kubectlWait  = time.Minute
)

func rnG(t *testing.T) *WithT {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(realNodeWait)
	g.SetDefaultEventuallyPollingInterval(500 * time.Millisecond)
	g.SetDefaultConsistentlyDuration(10 * time.Second)
	g.SetDefaultConsistentlyPollingInterval(time.Second)
	return g
}

// restrictedSpec is a pod spec of the busybox image that meets Pod Security
// "restricted" (the image runs as nobody).
func restrictedSpec(command ...string) corev1.PodSpec {
	return corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr.To[int64](1),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{{
			Name:            "main",
			Image:           cluster.BusyboxImage,
			ImagePullPolicy: corev1.PullNever,
			Command:         command,
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
		}},
	}
}

// runningOnRealNode is the pod once it runs on the real node with an address
// of the node's bridge (kwok would have given it one of its own).
func runningOnRealNode(g Gomega, node, ns, name string) *corev1.Pod {
	pod := &corev1.Pod{}
	g.Expect(c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pod)).To(Succeed())
	g.Expect(pod.Spec.NodeName).To(Equal(node))
	g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
	g.Expect(inPodSubnet(pod.Status.PodIP)).To(BeTrue(), "pod IP %q", pod.Status.PodIP)
	return pod
}

func inPodSubnet(ip string) bool {
	_, subnet, _ := net.ParseCIDR(podSubnet)
	parsed := net.ParseIP(ip)
	return parsed != nil && subnet.Contains(parsed)
}

// The real node is Ready, reached at its bridge address, tainted so that only pods
// meant for it go there, and left alone by kwok. Its pods run for real:
// their logs and an exec into them come through the apiserver.
func TestRealNodeRunsPodsWithLogsAndExec(t *testing.T) {
	node := c.RealNode(t)
	g := rnG(t)
	ctx := context.Background()

	n := &corev1.Node{}
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
	g.Expect(n.Status.Conditions).To(ContainElement(And(
		HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionTrue))))
	g.Expect(n.Status.Addresses).To(ContainElement(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "172.29.0.1"}))
	g.Expect(n.Spec.Taints).To(ContainElement(And(
		HaveField("Key", cluster.RealNodeLabel), HaveField("Effect", corev1.TaintEffectNoSchedule))))
	g.Expect(n.Annotations).NotTo(HaveKey("kwok.x-k8s.io/node"))

	ns := c.RealNodeNamespace(t, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"},
		Spec:       restrictedSpec("sh", "-c", "echo hello from $(hostname); exec sleep 3600"),
	}
	g.Expect(c.Client.Create(ctx, pod)).To(Succeed())
	g.Eventually(func(g Gomega) { runningOnRealNode(g, node, ns, "hello") }).Should(Succeed())

	g.Eventually(func() (string, error) { return c.KubectlWithin(kubectlWait, "logs", "-n", ns, "hello") }).
		Should(Equal("hello from hello\n"))
	g.Expect(c.KubectlWithin(kubectlWait, "exec", "-n", ns, "hello", "--", "id", "-u")).To(Equal("65534\n"))
	// A non-zero exit inside the container reaches kubectl.
	_, err := c.KubectlWithin(kubectlWait, "exec", "-n", ns, "hello", "--", "sh", "-c", "exit 7")
	g.Expect(err).To(MatchError(ContainSubstring("exit code 7")))
}

// A Job whose container really exits non-zero is a failed Job, one that
// exits zero completes, and a JobWatcher deletes the failed one after its
// TTL, as on kwok.
func TestRealNodeJobsSucceedAndFailForReal(t *testing.T) {
	node := c.RealNode(t)
	g := rnG(t)
	ctx := context.Background()
	ns := c.RealNodeNamespace(t, nil)
	c.RunManager(t, "--controllers", "jobwatcher")

	job := func(name, script string) *batchv1.Job {
		spec := restrictedSpec("sh", "-c", script)
		spec.RestartPolicy = corev1.RestartPolicyNever
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: corev1.PodTemplateSpec{Spec: spec}},
		}
	}
	watcher := &deckhandbatchv1.JobWatcher{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "failed-go"},
		Spec: deckhandbatchv1.JobWatcherSpec{JobPolicy: deckhandbatchv1.JobPolicy{
			TTLSecondsAfterFailed: ptr.To[int32](20),
			JobNamePatterns:       []string{"fails"},
		}},
	}
	g.Eventually(func() error { return c.Client.Create(ctx, watcher.DeepCopy()) }).WithTimeout(time.Minute).Should(Succeed())
	g.Expect(c.Client.Create(ctx, job("fails", "echo giving up; exit 3"))).To(Succeed())
	g.Expect(c.Client.Create(ctx, job("works", "echo done"))).To(Succeed())

	jobCondition := func(name string, cond batchv1.JobConditionType) func(Gomega) {
		return func(g Gomega) {
			j := &batchv1.Job{}
			g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, j)).To(Succeed())
			g.Expect(j.Status.Conditions).To(ContainElement(And(HaveField("Type", cond), HaveField("Status", corev1.ConditionTrue))))
		}
	}
	g.Eventually(jobCondition("fails", batchv1.JobFailed)).Should(Succeed())
	g.Eventually(jobCondition("works", batchv1.JobComplete)).Should(Succeed())

	// The failed Job's pod ran on the real node and exited 3.
	pods := &corev1.PodList{}
	g.Expect(c.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"job-name": "fails"})).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(1))
	g.Expect(pods.Items[0].Spec.NodeName).To(Equal(node))
	g.Expect(pods.Items[0].Status.ContainerStatuses).To(ContainElement(
		HaveField("State.Terminated", And(Not(BeNil()), HaveField("ExitCode", BeEquivalentTo(3))))))

	// The watcher deletes the failed Job after its TTL and keeps the other.
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fails"}, &batchv1.Job{}))
	}).Should(BeTrue())
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "works"}, &batchv1.Job{})).To(Succeed())
}

// A PodSet's pods run on the real node, Ready by the kubelet's word; one
// deleted is replaced.
func TestRealNodePodSet(t *testing.T) {
	node := c.RealNode(t)
	g := rnG(t)
	ctx := context.Background()
	ns := c.RealNodeNamespace(t, nil)
	c.RunManager(t, "--controllers", "podset")

	set := &appsv1beta1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sleepers"},
		Spec: appsv1beta1.PodSetSpec{Replicas: 2, Template: &corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "sleepers"}},
			Spec:       restrictedSpec("sleep", "3600"),
		}},
	}
	g.Expect(c.Client.Create(ctx, set)).To(Succeed())
	converged(t, ns, set.Name, 2, cluster.BusyboxImage)
	first := getPodSet(g, ns, set.Name).Status.PodNames
	for _, name := range first {
		g.Expect(runningOnRealNode(g, node, ns, name)).NotTo(BeNil())
	}

	// A pod deleted is stopped by the kubelet and replaced.
	g.Expect(c.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: first[0]}})).To(Succeed())
	g.Eventually(func(g Gomega) []string { return getPodSet(g, ns, set.Name).Status.PodNames }).
		ShouldNot(ContainElement(first[0]))
	converged(t, ns, set.Name, 2, cluster.BusyboxImage)
}

// A ModelBox whose image serves HTTP becomes Available once its readiness
// probe really succeeds; one whose probe fails stays unavailable until the
// page it probes appears.
func TestRealNodeModelBoxWaitsForItsReadinessProbe(t *testing.T) {
	c.RealNode(t)
	g := rnG(t)
	ctx := context.Background()
	ns := c.RealNodeNamespace(t, nil)
	c.RunManager(t, "--controllers", "modelbox")

	box := func(name, path string) *modelv1.ModelBox {
		return &modelv1.ModelBox{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: modelv1.ModelBoxSpec{
				Image:    cluster.HTTPDImage,
				Replicas: ptr.To[int32](1),
				Ports:    []modelv1.ServicePort{{Name: "http", Port: 8080}},
				Probes: &modelv1.Probes{Readiness: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 1,
				}},
			},
		}
	}
	available := func(name string) func() (metav1.ConditionStatus, error) {
		return func() (metav1.ConditionStatus, error) {
			b := &modelv1.ModelBox{}
			if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, b); err != nil {
				return "", err
			}
			if cond := meta.FindStatusCondition(b.Status.Conditions, modelv1.ConditionAvailable); cond != nil {
				return cond.Status, nil
			}
			return "", nil
		}
	}
	g.Expect(c.Client.Create(ctx, box("serves", "/index.html"))).To(Succeed())
	g.Expect(c.Client.Create(ctx, box("not-yet", "/ready.html"))).To(Succeed())
	g.Eventually(available("serves")).Should(Equal(metav1.ConditionTrue))

	// The other box's container runs, its probe gets 404s: not available.
	var pod corev1.Pod
	t.Cleanup(func() {
		if t.Failed() && pod.Name != "" {
			logs, err := c.KubectlWithin(kubectlWait, "logs", "-n", ns, pod.Name, "--tail", "60")
			t.Logf("manager pod %s/%s logs (%v):\n%s", ns, pod.Name, err, logs)
		}
	})
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(c.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{modelboxcontroller.LabelModelBox: "not-yet"})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		pod = pods.Items[0]
		g.Expect(pod.Status.ContainerStatuses).To(ContainElement(And(
			HaveField("State.Running", Not(BeNil())), HaveField("Ready", BeFalse()))))
	}).Should(Succeed())
	g.Consistently(available("not-yet")).Should(Equal(metav1.ConditionFalse))

	// The page appears: the probe succeeds and the box becomes Available.
	g.Expect(c.KubectlWithin(kubectlWait, "exec", "-n", ns, pod.Name, "--", "sh", "-c", "echo ready > /www/ready.html")).
		Error().NotTo(HaveOccurred())
	g.Eventually(available("not-yet")).Should(Equal(metav1.ConditionTrue))
}

// A PodBugger's debug container really starts in a real pod under the
// restricted profile (in a namespace enforcing Pod Security "restricted"),
// and one can exec into it.
func TestRealNodePodBuggerDebugContainerRuns(t *testing.T) {
	node := c.RealNode(t)
	g := rnG(t)
	ctx := context.Background()
	ns := c.RealNodeNamespace(t, map[string]string{
		debugv1beta1.NamespaceEnabledLabel:   "true",
		"pod-security.kubernetes.io/enforce": "restricted",
	})
	c.RunManager(t, "--controllers", "podbugger", "--podbugger-allowed-images", "localhost/deckhand/busybox:*")

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: map[string]string{"app": "web"}},
		Spec:       restrictedSpec("sleep", "3600"),
	}
	g.Expect(c.Client.Create(ctx, pod)).To(Succeed())
	g.Eventually(func(g Gomega) { runningOnRealNode(g, node, ns, "web") }).Should(Succeed())

	pb := &debugv1beta1.PodBugger{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shell"},
		Spec: debugv1beta1.PodBuggerSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Image:    cluster.BusyboxImage,
			Profile:  debugv1beta1.ProfileRestricted,
		},
	}
	// The manager serves its webhook once the create passes.
	g.Eventually(func() error { return c.Client.Create(ctx, pb.DeepCopy()) }).WithTimeout(time.Minute).Should(Succeed())
	g.Eventually(func(g Gomega) {
		got := &corev1.Pod{}
		g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(pod), got)).To(Succeed())
		g.Expect(got.Status.EphemeralContainerStatuses).To(ContainElement(And(
			HaveField("Name", "shell"), HaveField("State.Running", Not(BeNil())))))
	}).Should(Succeed())
	g.Eventually(pbStatus).WithArguments(pb).Should(And(HaveField("Installed", int32(1)),
		WithTransform(pbReadyReason, Equal(debugv1beta1.ReasonActive))))

	// The restricted profile runs the debugger as uid 65532, whatever user
	// the image names (busybox's own would be root, which runAsNonRoot
	// refuses).
	g.Expect(c.KubectlWithin(kubectlWait, "exec", "-n", ns, "web", "-c", "shell", "--", "id", "-u")).To(Equal("65532\n"))
	g.Eventually(pbStatus).WithArguments(pb).Should(HaveField("Pods", ContainElement(HaveField("State", debugv1beta1.DebuggerRunning))))
	// It shares the pod's network: the app's processes are not visible
	// (no targetContainerName), but its hostname is the pod's.
	g.Expect(c.KubectlWithin(kubectlWait, "exec", "-n", ns, "web", "-c", "shell", "--", "hostname")).To(Equal("web\n"))
}

// The names the install (install.yaml or the Helm chart) gives the manager's
// objects, in whatever namespace it goes to.
const (
	managerDeployment = "deckhand-controller-manager"
	metricsService    = "deckhand-controller-manager-metrics"
	webhookService    = "deckhand-webhook-service"
)

// The manager installed from install.yaml runs on the real node from its own
// image (bin/images/deckhand.tar, imported by hack/realnode.sh). The test
// moves the installed Deployment there and back: elsewhere its pod is a kwok
// pod, which runs nothing.
func TestRealNodeRunsTheInstalledManager(t *testing.T) {
	node := c.RealNode(t)
	g := rnG(t)
	key := client.ObjectKey{Namespace: cluster.Namespace, Name: managerDeployment}

	// The webhook configurations as installed: calling the Service (earlier
	// tests pointed them at a manager process on 127.0.0.1).
	installWebhookConfigurations(t)

	original := &appsv1.Deployment{}
	g.Expect(c.Client.Get(context.Background(), key, original)).To(Succeed())
	t.Cleanup(func() { moveManagerBack(t, node, key, original.Spec.Template) })
	setTemplate(g, key, func(spec *corev1.PodSpec) {
		spec.NodeSelector = map[string]string{cluster.RealNodeLabel: "true"}
		spec.Tolerations = []corev1.Toleration{cluster.RealNodeToleration()}
		spec.Containers[0].ImagePullPolicy = corev1.PullNever
	})

	managerServesOnRealNode(t, node, cluster.Namespace)
}

// The Helm chart installs the manager on the real node from its image
// (pulled never) in a fresh namespace and release, and it does there what
// the install.yaml copy does. The chart's cluster-wide objects (RBAC,
// webhook configurations) have the same names as install.yaml's: the release
// takes them over for the test and dist/install.yaml is applied again after
// it. The install.yaml copy keeps running as a kwok pod meanwhile, which runs
// nothing: the chart's manager is the only one at work (its Lease is in its
// own namespace).
func TestRealNodeRunsTheHelmChart(t *testing.T) {
	node := c.RealNode(t)
	helm := helmBinary(t)
	ns := c.Namespace(t, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	values, err := json.Marshal(map[string]any{
		"image":        map[string]any{"pullPolicy": corev1.PullNever},
		"nodeSelector": map[string]string{cluster.RealNodeLabel: "true"},
		"tolerations":  []corev1.Toleration{cluster.RealNodeToleration()},
	})
	if err != nil {
		t.Fatal(err)
	}
	valuesFile := filepath.Join(t.TempDir(), "values.json")
	if err := os.WriteFile(valuesFile, values, 0o600); err != nil {
		t.Fatal(err)
	}
	const release = "deckhand-e2e"
	t.Cleanup(func() { uninstallChart(t, helm, ns, release) })
	out, err := exec.Command(helm, "install", release, chartDir(), "--namespace", ns, "--kubeconfig", c.Kubeconfig,
		"--take-ownership", "--values", valuesFile).CombinedOutput()
	if err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}

	managerServesOnRealNode(t, node, ns)
}

// uninstallChart removes the release, waits until its manager has left the
// real node, and applies dist/install.yaml again for the cluster-wide
// objects the release had taken over (and deleted).
func uninstallChart(t *testing.T, helm, ns, release string) {
	g := rnG(t)
	out, err := exec.Command(helm, "uninstall", release, "--namespace", ns, "--kubeconfig", c.Kubeconfig,
		"--ignore-not-found", "--wait").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "helm uninstall: %s", out)
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(c.Client.List(context.Background(), pods, client.InNamespace(ns))).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty())
	}).Should(Succeed())
	// Everything but the CRDs, which helm uninstall keeps as they were: the
	// suite's manager runs outside the cluster, and its conversion URL
	// (owned by another field manager) would survive an apply beside
	// install.yaml's Service reference, which the apiserver refuses.
	installer, err := os.ReadFile(filepath.Join(repoRoot(), "dist", "install.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	objs := decode(t, installer)
	objs = slices.DeleteFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "CustomResourceDefinition" })
	applied, err := c.Kubectl("apply", "--server-side", "--force-conflicts", "-f", writeObjects(t, objs))
	g.Expect(err).NotTo(HaveOccurred(), "re-applying install.yaml: %s", applied)
	// The installed ServiceAccount, which later tests' managers run as, has
	// its permissions back.
	binding := &rbacv1.ClusterRoleBinding{}
	g.Expect(c.Client.Get(context.Background(), client.ObjectKey{Name: "deckhand-manager-rolebinding"}, binding)).To(Succeed())
	g.Expect(binding.Subjects).To(ConsistOf(HaveField("Namespace", cluster.Namespace)))
}

// managerServesOnRealNode proves that the manager installed in ns runs on
// the real node and does its job there: it passes its probes, becomes
// leader, serves its webhooks through its Service and its metrics to a
// scraper with a bound token, and to no one else.
func managerServesOnRealNode(t *testing.T, node, ns string) {
	t.Helper()
	g := rnG(t)
	ctx := context.Background()

	// Ready means its readiness probe (/readyz: caches synced, webhook server
	// serving) passed on the node; no restart means its liveness probe did.
	var pod corev1.Pod
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(c.Client.List(ctx, pods, client.InNamespace(ns),
			client.MatchingLabels{"control-plane": "controller-manager"})).To(Succeed())
		var onNode []corev1.Pod
		for _, p := range pods.Items {
			if p.Spec.NodeName == node && p.DeletionTimestamp == nil {
				onNode = append(onNode, p)
			}
		}
		g.Expect(onNode).To(HaveLen(1))
		pod = onNode[0]
		g.Expect(inPodSubnet(pod.Status.PodIP)).To(BeTrue())
		g.Expect(pod.Status.ContainerStatuses).To(ConsistOf(And(
			HaveField("Ready", BeTrue()), HaveField("RestartCount", BeEquivalentTo(0)),
			HaveField("ImageID", Not(BeEmpty())))))
	}).WithTimeout(3 * time.Minute).Should(Succeed())

	// Leader: the Lease in its namespace names the pod (controller-runtime's
	// identity is the hostname and a suffix).
	g.Eventually(func(g Gomega) {
		lease := &coordinationv1.Lease{}
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "deckhand.deckhand.dev"}, lease)).To(Succeed())
		g.Expect(lease.Spec.HolderIdentity).To(HaveValue(HavePrefix(pod.Name + "_")))
	}).Should(Succeed())
	// The election's Event is recorded too (through core/v1 Events, which
	// the leader election Role must allow).
	g.Eventually(func(g Gomega) {
		events := &corev1.EventList{}
		g.Expect(c.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(HaveField("Reason", "LeaderElection"),
			HaveField("Message", And(HavePrefix(pod.Name+"_"), HaveSuffix("became leader"))))))
	}).Should(Succeed())

	// Webhooks through the Service: the configuration calls the Service in
	// ns, whose only endpoint is the pod (the apiserver dials endpoints:
	// hack/cluster.sh), and a regular expression only the webhook compiles
	// is refused, naming the field.
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Name: "deckhand-validating-webhook-configuration"}, cfg)).To(Succeed())
	g.Expect(cfg.Webhooks).NotTo(BeEmpty())
	for _, w := range cfg.Webhooks {
		g.Expect(w.ClientConfig.Service).To(HaveValue(And(HaveField("Namespace", ns), HaveField("Name", webhookService))), w.Name)
	}
	g.Expect(serviceEndpoint(g, ns, webhookService, 9443)).To(Equal(net.JoinHostPort(pod.Status.PodIP, "9443")))
	bad := &deckhandbatchv1.JobWatcher{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace(t, nil), Name: "bad-regex"},
		Spec: deckhandbatchv1.JobWatcherSpec{JobPolicy: deckhandbatchv1.JobPolicy{
			TTLSecondsAfterSucceeded: ptr.To[int32](10),
			JobNamePatterns:          []string{"([a-z"},
		}},
	}
	g.Eventually(func() error { return c.Client.Create(ctx, bad.DeepCopy(), client.DryRunAll) }).
		Should(MatchError(And(ContainSubstring("spec.jobNamePatterns[0]"), ContainSubstring("error parsing regexp"))))

	// Metrics at the metrics Service's endpoint, the pod: for a scraper
	// whose bound token may read them, and for no one else.
	addr := serviceEndpoint(g, ns, metricsService, 8443)
	g.Expect(addr).To(Equal(net.JoinHostPort(pod.Status.PodIP, "8443")))
	scraperNS := c.Namespace(t, nil)
	allowed := serviceAccountToken(t, scraperNS, "scraper", true)
	denied := serviceAccountToken(t, scraperNS, "stranger", false)
	g.Eventually(scrape).WithArguments(addr, allowed).Should(And(
		HaveField("Code", http.StatusOK), HaveField("Body", ContainSubstring("controller_runtime_reconcile_total"))))
	g.Expect(scrape(addr, denied)).To(HaveField("Code", http.StatusForbidden))
	g.Expect(scrape(addr, "")).To(HaveField("Code", http.StatusUnauthorized))
}

// installWebhookConfigurations replaces the webhook configurations with
// those of dist/install.yaml.
func installWebhookConfigurations(t *testing.T) {
	t.Helper()
	installer, err := os.ReadFile(filepath.Join(repoRoot(), "dist", "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var webhooks []*unstructured.Unstructured
	for _, o := range decode(t, installer) {
		if strings.HasSuffix(o.GetKind(), "WebhookConfiguration") {
			webhooks = append(webhooks, o)
		}
	}
	if len(webhooks) == 0 {
		t.Fatal("dist/install.yaml has no webhook configuration")
	}
	if _, err := c.Kubectl("replace", "-f", writeObjects(t, webhooks)); err != nil {
		t.Fatal(err)
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	NewWithT(t).Expect(c.Client.Get(context.Background(), client.ObjectKey{Name: "deckhand-validating-webhook-configuration"}, cfg)).To(Succeed())
	for _, w := range cfg.Webhooks {
		NewWithT(t).Expect(w.ClientConfig.Service).NotTo(BeNil(), w.Name)
	}
}

func setTemplate(g Gomega, key client.ObjectKey, change func(*corev1.PodSpec)) {
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := &appsv1.Deployment{}
		if err := c.Client.Get(context.Background(), key, d); err != nil {
			return err
		}
		change(&d.Spec.Template.Spec)
		return c.Client.Update(context.Background(), d)
	})).To(Succeed())
}

// moveManagerBack restores the installed Deployment's pod template and waits
// until no manager pod is left on the real node, so that no later test
// meets a second, real manager.
func moveManagerBack(t *testing.T, node string, key client.ObjectKey, template corev1.PodTemplateSpec) {
	g := rnG(t)
	setTemplate(g, key, func(spec *corev1.PodSpec) { *spec = template.Spec })
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(c.Client.List(context.Background(), pods, client.InNamespace(cluster.Namespace),
			client.MatchingLabels{"control-plane": "controller-manager"})).To(Succeed())
		for _, p := range pods.Items {
			g.Expect(p.Spec.NodeName).NotTo(Equal(node), p.Name)
		}
	}).Should(Succeed())
}

// serviceEndpoint is the address the Service ns/name sends port to: that
// of its one ready endpoint, on the real node's bridge.
func serviceEndpoint(g Gomega, ns, name string, port int32) string {
	var addr string
	g.Eventually(func(g Gomega) {
		slices := &discoveryv1.EndpointSliceList{}
		g.Expect(c.Client.List(context.Background(), slices, client.InNamespace(ns),
			client.MatchingLabels{discoveryv1.LabelServiceName: name})).To(Succeed())
		g.Expect(slices.Items).To(HaveLen(1), "EndpointSlices of Service %s/%s", ns, name)
		var ready []string
		for _, e := range slices.Items[0].Endpoints {
			if ptr.Deref(e.Conditions.Ready, false) && inPodSubnet(e.Addresses[0]) {
				ready = append(ready, e.Addresses[0])
			}
		}
		g.Expect(ready).To(HaveLen(1))
		g.Expect(slices.Items[0].Ports).To(ContainElement(HaveField("Port", HaveValue(Equal(port)))))
		addr = net.JoinHostPort(ready[0], fmt.Sprint(port))
	}).Should(Succeed())
	return addr
}

// serviceAccountToken creates a ServiceAccount, bound to the
// metrics-reader ClusterRole if allowed, and returns a bound token for it.
func serviceAccountToken(t *testing.T, ns, name string, allowed bool) string {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	g.Expect(c.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
	if allowed {
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-metrics-"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "deckhand-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
		}
		g.Expect(c.Client.Create(ctx, binding)).To(Succeed())
		t.Cleanup(func() { _ = c.Client.Delete(context.Background(), binding) })
	}
	tr, err := c.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}},
		metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

type scraped struct {
	Code int
	Body string
}

// scrape GETs /metrics over HTTPS (the manager's certificate is its own,
// self-signed) with the token, if any.
func scrape(addr, token string) (scraped, error) {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// The metrics certificate is the manager's own, self-signed.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("https://%s/metrics", addr), nil)
	if err != nil {
		return scraped{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return scraped{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return scraped{Code: resp.StatusCode, Body: string(body)}, err
}
