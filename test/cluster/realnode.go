package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The real node (hack/realnode.sh) carries the label RealNodeLabel=true and
// the taint RealNodeLabel=true:NoSchedule, so that only pods meant for it
// run there; the kwok nodes carry the label type=kwok.
const (
	RealNodeLabel = "deckhand.dev/real-node"
	// Images imported into the real node (hack/images.sh test); both run as
	// nobody (65534). HTTPDImage serves /www on port 8080.
	BusyboxImage = "localhost/deckhand/busybox:v1"
	HTTPDImage   = "localhost/deckhand/httpd:v1"
)

// findRealNode records the cluster's real node, or why it has none.
func (c *Cluster) findRealNode(ctx context.Context) error {
	nodes := &corev1.NodeList{}
	if err := c.Client.List(ctx, nodes, client.MatchingLabels{RealNodeLabel: "true"}); err != nil {
		return fmt.Errorf("listing the real node: %w", err)
	}
	if len(nodes.Items) > 0 {
		c.realNode = nodes.Items[0].Name
		return nil
	}
	reason, err := os.ReadFile(filepath.Join(c.root, "bin", "realnode", c.Name+".unavailable"))
	switch {
	case err == nil:
		c.noRealNode = strings.TrimSpace(string(reason))
	case errors.Is(err, os.ErrNotExist):
		c.noRealNode = "hack/cluster.sh started none and left no reason"
	default:
		return err
	}
	return nil
}

// RealNode returns the name of the cluster's real node, where pods really
// run, or skips the test with one line saying why this machine has none. If
// the test fails, the tails of the kubelet and containerd logs are printed.
func (c *Cluster) RealNode(t testing.TB) string {
	t.Helper()
	if c.realNode == "" {
		t.Skipf("skipped: no real node on this machine (%s)", c.noRealNode)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("real node logs:\n%s", c.RealNodeLogs())
		}
	})
	return c.realNode
}

// RealNodeNamespace creates a namespace (with the given labels) whose pods
// all go to the real node: the apiserver's PodNodeSelector and
// PodTolerationRestriction plugins add the node selector and toleration to
// every pod created there, whatever made it (a Deployment, a Job, a
// controller). It skips the test where there is no real node.
func (c *Cluster) RealNodeNamespace(t testing.TB, labels map[string]string) string {
	t.Helper()
	c.RealNode(t)
	tolerations, err := json.Marshal([]corev1.Toleration{RealNodeToleration()})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-real-", Labels: labels, Annotations: map[string]string{
		"scheduler.alpha.kubernetes.io/node-selector":      RealNodeLabel + "=true",
		"scheduler.alpha.kubernetes.io/defaultTolerations": string(tolerations),
	}}}
	return c.createNamespace(t, ns)
}

// RealNodeToleration tolerates the real node's taint.
func RealNodeToleration() corev1.Toleration {
	return corev1.Toleration{Key: RealNodeLabel, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
}

// RealNodeLogs returns the tails of the real node's kubelet and containerd
// logs.
func (c *Cluster) RealNodeLogs() string {
	out, err := exec.Command(filepath.Join(c.root, "hack", "realnode.sh"), "logs", c.Name).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%s(realnode.sh logs: %v)", out, err)
	}
	return string(out)
}
