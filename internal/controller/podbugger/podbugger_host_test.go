package podbugger_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// hostPIDPod creates a running pod, labelled app=web, that shares its
// node's process namespace: a debug container in it would see every
// process of the node.
func hostPIDPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: web},
		Spec: corev1.PodSpec{HostPID: true,
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
	env.Create(t, p)
	setRunning(t, p)
	return p
}

// TestPodsThatReachTheirNodeAreSkipped: a PodBugger does not inject into a
// hostPID pod it selects, and says so in an Event on the PodBugger; it
// injects into the ordinary pod beside it.
func TestPodsThatReachTheirNodeAreSkipped(t *testing.T) {
	g := testenv.NewG(t)
	ns := enabledNamespace(t)
	env.StartManager(t, options())
	host := hostPIDPod(t, ns, "web-host")
	pod(t, ns, "web-1", web, true)
	pb := podBugger(ns, "web-debug", web)
	env.Create(t, pb)

	g.Eventually(ephemeral(ns, "web-1")).Should(HaveLen(1))
	g.Eventually(env.Events(ns, pb)).Should(ContainElement(
		"PodReachesHost: Pod web-host skipped: pod reaches into its node (hostPID), and so would a debug container in it; " +
			"the operator allows that with --podbugger-allow-host-access"))
	g.Consistently(ephemeral(ns, host.Name)).Should(BeEmpty())
}

// TestTheOperatorMayAllowPodsThatReachTheirNode: with
// --podbugger-allow-host-access, the hostPID pod is injected.
func TestTheOperatorMayAllowPodsThatReachTheirNode(t *testing.T) {
	g := testenv.NewG(t)
	ns := enabledNamespace(t)
	opts := options()
	opts.PodBuggerAllowHostAccess = true
	env.StartManager(t, opts)
	hostPIDPod(t, ns, "web-host")
	env.Create(t, podBugger(ns, "web-debug", web))
	g.Eventually(ephemeral(ns, "web-host")).Should(HaveLen(1))
}
