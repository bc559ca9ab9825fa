//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/deckhand-dev/deckhand/internal/testenv"
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
	health := testenv.FreeAddr(t)
	p := c.RunManager(t, "--leader-elect", "--leader-election-namespace", ns, "--health-probe-bind-address", health)

	g.Eventually(p.Logs).WithTimeout(time.Minute).Should(ContainSubstring(`"elected leader"`))
	g.Eventually(func() (int, error) {
		resp, err := http.Get("http://" + health + "/readyz")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		return resp.StatusCode, nil
	}).WithTimeout(time.Minute).Should(Equal(http.StatusOK))
	g.Expect(c.Kubectl("get", "lease", "-n", ns, "deckhand.deckhand.dev", "-o", "name")).
		To(Equal("lease.coordination.k8s.io/deckhand.deckhand.dev\n"))
	g.Expect(p.Exited()).To(BeFalse())
}
