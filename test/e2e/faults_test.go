//go:build e2e

package e2e

import (
	"testing"

	"github.com/deckhand-dev/deckhand/test/cluster"
	"github.com/deckhand-dev/deckhand/test/faults/clusterfaults"
)

// The faults of make test-faults that need the local cluster, bounded
// (smaller PodSets, one run each) so that make test stays short: see
// test/faults/clusterfaults and docs/development/fault-suite.md. They restart the
// suite's own control plane, which is ready again when they end.

func TestPodSetRidesOutAnApiserverRestart(t *testing.T) {
	clusterfaults.RunRestart(t, c, clusterfaults.Restart{Component: cluster.Apiserver, Size: 60, At: 10}).Check(t)
}

func TestPodSetRidesOutAnEtcdRestart(t *testing.T) {
	clusterfaults.RunRestart(t, c, clusterfaults.Restart{Component: cluster.Etcd, Size: 60, At: 10}).Check(t)
}

func TestPodSetSurvivesLeaderFailover(t *testing.T) {
	clusterfaults.RunFailover(t, c, clusterfaults.Failover{Size: 100, At: 20}).Check(t)
}

// The checks above can fail: two managers without leader election both
// create the PodSet's pods, and the observer sees more than its size.
func TestPodSetFaultChecksCatchASplitBrain(t *testing.T) {
	if res, caught := clusterfaults.CatchSplitBrain(t, c, 100, 3); !caught {
		t.Errorf("two managers without leader election were not caught exceeding the size in 3 runs (%s); violations: %v", res.Figures, res.Violations)
	}
}
