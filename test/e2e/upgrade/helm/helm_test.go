//go:build e2e

// Package helm upgrades a Helm release of the previous Deckhand release
// (its own chart package, deckhand-VERSION.tgz, from `make build-previous`)
// to the current chart as docs/operations/upgrading.md says: the CRDs
// applied first (Helm never upgrades crds/), then helm upgrade.
// upgrade.Check does the rest.
package helm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/test/cluster"
	"github.com/deckhand-dev/deckhand/test/e2e/upgrade"
)

var (
	c    *cluster.Cluster
	helm string
)

func TestMain(m *testing.M) {
	var err error
	if helm, err = upgrade.HelmBinary(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(1)
	}
	upgrade.Main(m, &c, installPrevious)
}

// installPrevious installs the previous release's chart package as
// docs/operations/install.md says: into deckhand-system, labelled to
// enforce the restricted Pod Security level.
func installPrevious(c *cluster.Cluster, previous upgrade.Previous) error {
	chart, err := previous.Chart()
	if err != nil {
		return err
	}
	if _, err := c.Kubectl("create", "namespace", cluster.Namespace); err != nil {
		return err
	}
	if _, err := c.Kubectl("label", "namespace", cluster.Namespace, "pod-security.kubernetes.io/enforce=restricted"); err != nil {
		return err
	}
	out, err := exec.Command(helm, "install", "deckhand", chart,
		"-n", cluster.Namespace, "--kubeconfig", c.Kubeconfig).CombinedOutput()
	if err != nil {
		return fmt.Errorf("helm install of the previous chart: %w: %s", err, out)
	}
	return c.WriteManagerKubeconfig()
}

func TestHelmUpgradeFromPreviousRelease(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	upgrade.Check(t, c, func(g Gomega) {
		g.Expect(c.Kubectl("apply", "--server-side", "--force-conflicts", "-f", filepath.Join(root, "charts", "deckhand", "crds"))).
			Error().NotTo(HaveOccurred())
		out, err := exec.Command(helm, "upgrade", "deckhand", filepath.Join(root, "charts", "deckhand"),
			"-n", cluster.Namespace, "--kubeconfig", c.Kubeconfig, "--reset-then-reuse-values").CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "helm upgrade: %s", out)
	})
}
