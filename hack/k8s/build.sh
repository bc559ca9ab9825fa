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

# shellcheck source=ldflags.sh
. "$here/ldflags.sh"
ldflags=$(k8s_ldflags "$(go list -m -f '{{.Version}}' k8s.io/kubernetes)")

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
