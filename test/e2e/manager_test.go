//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

func TestClusterHasReadyNodes(t *testing.T) {
	g := NewWithT(t)
	nodes := &corev1.NodeList{}
	g.Expect(c.Client.List(context.Background(), nodes)).To(Succeed())
	g.Expect(nodes.Items).To(HaveLen(3))
	for _, n := range nodes.Items {
		g.Expect(n.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionTrue))), n.Name)
	}
}

func TestManagerBecomesLeaderAndReady(t *testing.T) {
	g := NewWithT(t)
	ns := c.Namespace(t, nil)
	// RunManager returns once /readyz answers 200.
	p := c.RunManager(t, "--leader-elect", "--leader-election-namespace", ns)

	g.Eventually(p.Logs).WithTimeout(time.Minute).Should(ContainSubstring(`"elected leader"`))
	g.Expect(c.Kubectl("get", "lease", "-n", ns, "deckhand.deckhand.dev", "-o", "name")).
		To(Equal("lease.coordination.k8s.io/deckhand.deckhand.dev\n"))
	g.Expect(p.Exited()).To(BeFalse())
}
