#!/usr/bin/env bash
# Builds the pinned Kubernetes toolchain into $1 (default: <repo>/bin/k8s),
# or only the named binaries (`build.sh DIR kubelet` builds the real node's
# kubelet, which the simulated cluster does not need). Idempotent: go's build cache makes a second run take seconds, and a binary
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

# The binaries and their packages; kubelet is only built when asked for.
declare -A packages=(
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
  [kubectl]=k8s.io/kubernetes/cmd/kubectl
  [etcd]=go.etcd.io/etcd/server/v3
  [kwok]=sigs.k8s.io/kwok/cmd/kwok
  [kwokctl]=sigs.k8s.io/kwok/cmd/kwokctl
  [kubelet]=k8s.io/kubernetes/cmd/kubelet
)
shift || true
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok kwokctl)
for name in "${names[@]}"; do
  pkg=${packages[$name]:?unknown binary $name}
  echo "building $name" >&2
  go build -trimpath -ldflags "$ldflags" -o "$out/$name" "$pkg"
done
