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

func TestMain(m *testing.M) {
	cluster.MainWithInstall(m, &c, 3, cluster.InstallFile(Testdata("install.yaml")))
}

// The previous release's install.yaml, then the current one applied over
// it (kubectl apply --server-side), as README.md, "Upgrading", says.
func TestUpgradeInstallYAMLFromV1alpha1(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	Check(t, c, func(g Gomega) {
		g.Expect(c.Install(filepath.Join(root, "dist", "install.yaml"))).To(Succeed())
	})
}
