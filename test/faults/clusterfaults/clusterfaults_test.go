//go:build e2e && clusterfaults

package clusterfaults_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/deckhand-dev/deckhand/test/cluster"
	"github.com/deckhand-dev/deckhand/test/faults/clusterfaults"
)

var c *cluster.Cluster

// The full runs (make test-faults); test/e2e runs smaller ones.
var (
	restarts = []clusterfaults.Restart{
		{Size: 200, At: 20},
		{Size: 200, Rollout: true, At: 20},
		{Component: cluster.Apiserver, Size: 200, At: 20},
		{Component: cluster.Apiserver, Size: 200, Rollout: true, At: 20},
		{Component: cluster.Etcd, Size: 200, At: 20},
		{Component: cluster.Etcd, Size: 200, Rollout: true, At: 20},
	}
	failover = clusterfaults.Failover{Size: 300, At: 50}
)

func restartName(r clusterfaults.Restart) string {
	if r.Component == "" {
		return r.Name() + ", baseline"
	}
	return r.Name() + ", " + r.Component + " restarted"
}

const failoverName = "PodSet scale up 0→300, leader failover"

// selected reports whether $FAULTS_SCENARIO (a substring, as in
// test/faults) selects the scenario.
func selected(name string) bool {
	return strings.Contains(name, os.Getenv("FAULTS_SCENARIO"))
}

// Five kwok nodes hold 550 pods: the largest scenario makes 300, plus a
// rollout's surge. No cluster is started when $FAULTS_SCENARIO selects
// nothing here.
func TestMain(m *testing.M) {
	names := make([]string, 0, 1+len(restarts))
	names = append(names, failoverName)
	for _, r := range restarts {
		names = append(names, restartName(r))
	}
	if !slices.ContainsFunc(names, selected) {
		fmt.Printf("clusterfaults: FAULTS_SCENARIO=%s selects no scenario on the local cluster\n", os.Getenv("FAULTS_SCENARIO"))
		os.Exit(0)
	}
	cluster.Main(m, &c, 5)
}

// TestClusterFaults runs every scenario in full and prints the table
// (make test-faults).
func TestClusterFaults(t *testing.T) {
	var rows []clusterfaults.Result
	t.Cleanup(func() { clusterfaults.PrintTable(rows) })
	for _, r := range restarts {
		if !selected(restartName(r)) {
			continue
		}
		t.Run(restartName(r), func(t *testing.T) {
			res := clusterfaults.RunRestart(t, c, r)
			rows = append(rows, res)
			res.Check(t)
		})
	}
	if selected(failoverName) {
		t.Run(failoverName, func(t *testing.T) {
			res := clusterfaults.RunFailover(t, c, failover)
			rows = append(rows, res)
			res.Check(t)
		})
	}
}

// TestSplitBrainIsCaught shows that the checks can fail: with the second
// manager's leader election off, both managers create pods for the same
// PodSet at once, and the observer sees more than size live pods.
func TestSplitBrainIsCaught(t *testing.T) {
	if res, caught := clusterfaults.CatchSplitBrain(t, c, 300, 3); !caught {
		t.Errorf("two managers without leader election were not caught exceeding the size in 3 runs; violations: %v", res.Violations)
	}
}
