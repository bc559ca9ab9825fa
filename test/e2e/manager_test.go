//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/test/cluster"
)

// The three kwok nodes are Ready (the real node, where there is one, is
// checked in realnode_test.go).
func TestClusterHasReadyNodes(t *testing.T) {
	g := NewWithT(t)
	nodes := &corev1.NodeList{}
	g.Expect(c.Client.List(context.Background(), nodes, client.MatchingLabels{"type": "kwok"})).To(Succeed())
	g.Expect(nodes.Items).To(HaveLen(3))
	for _, n := range nodes.Items {
		g.Expect(n.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionTrue))), n.Name)
	}
}

func TestManagerBecomesLeaderAndReady(t *testing.T) {
	g := NewWithT(t)
	// RunManager returns once /readyz answers 200. The Lease goes to the
	// manager's namespace, where the installed Role allows it.
	p := c.RunManager(t, "--leader-elect")

	g.Eventually(p.Logs).WithTimeout(time.Minute).Should(ContainSubstring(`"elected leader"`))
	lease := &coordinationv1.Lease{}
	g.Expect(c.Client.Get(context.Background(), client.ObjectKey{Namespace: cluster.Namespace, Name: "deckhand.deckhand.dev"}, lease)).To(Succeed())
	g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
	g.Expect(p.Exited()).To(BeFalse())
}
