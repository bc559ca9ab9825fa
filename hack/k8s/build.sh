#!/usr/bin/env bash
# Builds the pinned Kubernetes toolchain into $1 (default: <repo>/bin/k8s).
# Idempotent: go's build cache makes a second run take seconds, and a binary
# is only rewritten when its inputs changed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../bin/k8s}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$here"

k8s_version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
major=${k8s_version#v}; major=${major%%.*}
minor=${k8s_version#v*.}; minor=${minor%%.*}
ldflags="-s -w \
 -X k8s.io/component-base/version.gitVersion=${k8s_version} \
 -X k8s.io/component-base/version.gitMajor=${major} \
 -X k8s.io/component-base/version.gitMinor=${minor} \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/client-go/pkg/version.gitVersion=${k8s_version} \
 -X k8s.io/client-go/pkg/version.gitMajor=${major} \
 -X k8s.io/client-go/pkg/version.gitMinor=${minor}"

build() { # name package
  echo "building $1" >&2
  go build -trimpath -ldflags "$ldflags" -o "$out/$1" "$2"
}
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
build kubectl k8s.io/kubernetes/cmd/kubectl
build etcd go.etcd.io/etcd/server/v3
build kwok sigs.k8s.io/kwok/cmd/kwok
build kwokctl sigs.k8s.io/kwok/cmd/kwokctl
