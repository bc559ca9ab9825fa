//go:build tools

// Package tools pins the Kubernetes v1.34.4 binaries make test-compat runs.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
