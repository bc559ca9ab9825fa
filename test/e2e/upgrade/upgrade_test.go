//go:build e2e

package upgrade

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/test/cluster"
)

var c *cluster.Cluster

// TestMain installs the previous release's own install.yaml, as
// docs/operations/install.md says (kubectl apply --server-side).
func TestMain(m *testing.M) {
	Main(m, &c, func(c *cluster.Cluster, previous Previous) error { return c.Install(previous.InstallYAML()) })
}

// The previous release's install.yaml, then the current one applied over
// it (kubectl apply --server-side), as docs/operations/upgrading.md says.
func TestUpgradeInstallYAMLFromPreviousRelease(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	Check(t, c, func(g Gomega) {
		g.Expect(c.Install(filepath.Join(root, "dist", "install.yaml"))).To(Succeed())
	})
}
