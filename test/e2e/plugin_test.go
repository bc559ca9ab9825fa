//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

// kubectlDeckhand runs `kubectl deckhand ARGS` as a user would: the
// project's kubectl, with the plugin (DECKHAND_PLUGIN_BIN, default
// bin/kubectl-deckhand) on PATH.
func kubectlDeckhand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	plugin := os.Getenv("DECKHAND_PLUGIN_BIN")
	if plugin == "" {
		plugin = filepath.Join(repoRoot(), "bin", "kubectl-deckhand")
	}
	plugin, err := filepath.Abs(plugin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(plugin); err != nil {
		t.Fatalf("no plugin at %s: run through 'make test-e2e', which builds it: %v", plugin, err)
	}
	kubectl, _ := filepath.Abs(filepath.Join(repoRoot(), "bin", "k8s", "kubectl"))
	// The plugin's name comes first: kubectl looks for a plugin only in the
	// arguments before its first flag. The cluster comes from KUBECONFIG.
	cmd := exec.Command(kubectl, append([]string{"deckhand"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(plugin)+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+c.Kubeconfig)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// `kubectl deckhand` explains what a user asks about, on the local cluster:
// every object's state, why a Job stays, a pod's incidents and their logs,
// and what a PodBugger would do to a pod.
func TestKubectlDeckhand(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c.RunManager(t, "--controllers", "podset,jobwatcher,podbugger", "--podbugger-allowed-images", "docker.io/library/busybox:*")
	ns := c.Namespace(t, map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})

	// status: a PodSet and a JobWatcher, each Ready once Deckhand has seen it.
	g.Expect(c.Client.Create(ctx, &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1beta1.PodSetSpec{Replicas: 1}})).To(Succeed())
	g.Expect(c.Client.Create(ctx, &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep-an-hour"},
		Spec: deckhandbatchv1.JobWatcherSpec{JobPolicy: deckhandbatchv1.JobPolicy{TTLSecondsAfterSucceeded: ptr.To[int32](3600)}}})).To(Succeed())
	g.Eventually(func() (string, error) { return kubectlDeckhand(t, "status", "-n", ns) }).WithTimeout(time.Minute).Should(And(
		MatchRegexp(`PodSet\s+`+ns+`\s+web\s+True\s+False`),
		MatchRegexp(`JobWatcher\s+`+ns+`\s+keep-an-hour\s+True\s+False`)))

	// why job: the watcher that decides, and when the Job goes.
	job := runJob(t, ns, "pi", false)
	finished := waitFinished(t, job, batchv1.JobComplete)
	out, err := kubectlDeckhand(t, "why", "job", "pi", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("Decides: JobWatcher/" + ns + "/keep-an-hour"))
	g.Expect(out).To(ContainSubstring("goes at " + finished.Add(time.Hour).UTC().Format(time.RFC3339)))
	out, _ = kubectlDeckhand(t, "why", "job", "pi", "-n", "default")
	g.Expect(out).To(ContainSubstring(`"pi" not found`))

	// incidents: newest first, and the captured log tail.
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	for i, reason := range []debugv1beta1.IncidentReason{debugv1beta1.IncidentError, debugv1beta1.IncidentOOMKilled} {
		at := metav1.NewTime(now.Add(time.Duration(i) * time.Minute))
		g.Expect(c.Client.Create(ctx, &debugv1beta1.PodIncident{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-" + strings.ToLower(string(reason))},
			Spec: debugv1beta1.PodIncidentSpec{PodBugger: "recorder", Pod: debugv1beta1.IncidentPod{Name: "web-0", UID: "u"}, Container: "main",
				Reason: reason, Count: 1, FirstTime: at, LastTime: at, LogTail: "starting\nout of memory\n",
				LastFailure: &debugv1beta1.FailedInstance{ExitCode: 137}}})).To(Succeed())
	}
	out, err = kubectlDeckhand(t, "incidents", "web-0", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`(?s)web-oomkilled\s+web-0\s+main\s+OOMKilled\s+1\s+137.*web-error\s+web-0`), "newest first")
	out, err = kubectlDeckhand(t, "incidents", "logs", "web-oomkilled", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(Equal("starting\nout of memory\n"))

	// debug: what a PodBugger would add, and the rules that block it. The
	// pod cannot be scheduled, so the running PodBugger leaves it alone.
	g.Expect(c.Client.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shell", Labels: map[string]string{"app": "shell"}},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"deckhand.dev/no-such-node": "true"},
			Containers: []corev1.Container{{Name: "main", Image: "busybox:1.37"}}}})).To(Succeed())
	g.Expect(c.Client.Create(ctx, &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dbg"},
		Spec: debugv1beta1.PodBuggerSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "shell"}}, Image: "docker.io/library/busybox:1.36"}})).To(Succeed())
	out, err = kubectlDeckhand(t, "debug", "shell", "-n", ns, "--allowed-images", "docker.io/library/busybox:*")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("would add the ephemeral container"))
	g.Expect(out).To(ContainSubstring("image docker.io/library/busybox:1.36"))
	g.Expect(out).To(ContainSubstring("blocked by NotRunning: the pod is Pending"))
	g.Expect(out).NotTo(ContainSubstring(debugv1beta1.ReasonImageNotAllowed))
	out, err = kubectlDeckhand(t, "debug", "shell", "-n", ns, "--allowed-images", "registry.example.com/*")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("blocked by " + debugv1beta1.ReasonImageNotAllowed))
}
