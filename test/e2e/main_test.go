//go:build e2e

// Package e2e runs Deckhand against a local cluster: the pinned control plane
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) with kwok
// nodes, started for the run and removed after it.
package e2e

import (
	"testing"

	"github.com/deckhand-dev/deckhand/test/cluster"
)

var c *cluster.Cluster

func TestMain(m *testing.M) { cluster.Main(m, &c, 3) }
