#!/usr/bin/env bash
# Starts or removes a local Kubernetes cluster made of the pinned binaries in
# bin/k8s: real etcd, kube-apiserver, kube-controller-manager and
# kube-scheduler, with kwok simulating the nodes' kubelets.
#
#   hack/cluster.sh up   NAME KUBECONFIG [NODES]   start (harmless if running)
#   hack/cluster.sh down NAME KUBECONFIG           remove
#
# Clusters live under $KWOK_WORKDIR (default bin/kwok).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${K8S_BIN:-$root/bin/k8s}
export KWOK_WORKDIR=${KWOK_WORKDIR:-$root/bin/kwok}
export KWOK_KUBE_VERSION=v1.37.1
export KWOK_KUBECTL_BINARY=$bin/kubectl

cmd=${1:?usage: cluster.sh up|down NAME KUBECONFIG [NODES]}
name=${2:?cluster name}
kubeconfig=${3:?kubeconfig path}
nodes=${4:-3}
kwokctl() { "$bin/kwokctl" --name "$name" "$@"; }
# kwokctl would add every cluster to ~/.kube/config and make it the current
# context; the user's file stays untouched, ours is written to $kubeconfig.
contexts=$KWOK_WORKDIR/contexts.kubeconfig
kubectl() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }

# A single-instance control plane gains nothing from leader election, and a
# saturated apiserver can make the scheduler or controller-manager lose its
# lease and exit (kwokctl does not restart them). The default Service range
# holds about 250 ClusterIPs; benchmarks make hundreds of Services.
# (kwokctl maps each component's first --extra-args by position: keep every
# component's first line in this order.)
service_range=10.96.0.0/16
extra_args=(
  --extra-args "kube-apiserver=service-cluster-ip-range=$service_range"
  --extra-args "kube-scheduler=leader-elect=false"
  --extra-args "kube-controller-manager=leader-elect=false"
  --extra-args "kube-controller-manager=service-cluster-ip-range=$service_range"
)

# free_port prints a random port in 20000-32000 that nothing listens on.
# kwokctl's own choice starts at 32767 and counts down, so clusters made at
# the same moment by other users of the machine pick the same ports.
free_port() {
  local p
  while :; do
    p=$(shuf -i 20000-32000 -n 1)
    ss -Hltn "sport = :$p" | grep -q . || { echo "$p"; return; }
  done
}

create() {
  # A cluster left half-made by an earlier run (killed machine, stopped
  # processes) is removed first so that create starts clean.
  kwokctl delete cluster --kubeconfig "$contexts" >/dev/null 2>&1 || true
  kwokctl create cluster \
    --runtime binary \
    --kube-apiserver-binary "$bin/kube-apiserver" \
    --kube-controller-manager-binary "$bin/kube-controller-manager" \
    --kube-scheduler-binary "$bin/kube-scheduler" \
    --kwok-controller-binary "$bin/kwok" \
    --etcd-binary "$bin/etcd" \
    --kubeconfig "$contexts" \
    --disable-qps-limits \
    --etcd-port "$(free_port)" \
    --kube-controller-manager-port "$(free_port)" \
    --kube-scheduler-port "$(free_port)" \
    --controller-port "$(free_port)" \
    "${extra_args[@]}" \
    --wait 2m
}

# ready scales the cluster to $nodes nodes and waits until they are Ready and
# the controller-manager works.
ready() {
  mkdir -p "$(dirname "$kubeconfig")"
  cp "$KWOK_WORKDIR/clusters/$name/kubeconfig.yaml" "$kubeconfig" || return 1
  # On a loaded machine the controller-manager can give up waiting for a
  # healthy apiserver and exit; kwokctl does not restart it. Starting the
  # cluster again starts only the components that are not running.
  kwokctl start cluster >/dev/null 2>&1 || true
  have=$(kubectl get nodes --no-headers 2>/dev/null | wc -l)
  if [ "$have" -lt "$nodes" ]; then
    kwokctl scale node --replicas "$nodes" >/dev/null || return 1
  fi
  kubectl wait --for=condition=Ready node --all --timeout=2m >/dev/null || return 1
  # Pods need the default ServiceAccount, which the controller-manager makes
  # shortly after start: it is also the proof that the controller-manager runs.
  for i in $(seq 1 120); do
    kubectl get serviceaccount default -n default >/dev/null 2>&1 && return 0
    # Restart it if it gave up on the apiserver meanwhile.
    [ $((i % 15)) = 0 ] && { kwokctl start cluster >/dev/null 2>&1 || true; }
    sleep 1
  done
  echo "cluster $name: no default ServiceAccount after 2 minutes; is kube-controller-manager running?" >&2
  return 1
}

up() {
  if kwokctl get clusters 2>/dev/null | grep -qx "$name" &&
     "$bin/kubectl" --kubeconfig "$KWOK_WORKDIR/clusters/$name/kubeconfig.yaml" get --raw /readyz >/dev/null 2>&1 &&
     ready; then
    echo "cluster $name is already running" >&2
  else
    # kwokctl picks each component's port when it creates the cluster; a
    # cluster created at the same moment elsewhere on the machine can take
    # one first, and that component then exits. Such a cluster is made anew.
    for attempt in 1 2 3; do
      if create && ready; then
        break
      fi
      if [ "$attempt" = 3 ]; then
        echo "cluster $name: not ready after 3 attempts; logs in $KWOK_WORKDIR/clusters/$name/logs" >&2
        exit 1
      fi
      echo "cluster $name: attempt $attempt failed (logs in $KWOK_WORKDIR/clusters/$name/logs); creating it again" >&2
    done
  fi
  echo "cluster $name is ready with $(kubectl get nodes --no-headers | wc -l) nodes; kubeconfig: $kubeconfig" >&2
}

down() {
  kwokctl delete cluster --kubeconfig "$contexts"
  rm -f "$kubeconfig"
}

case "$cmd" in
  up) up ;;
  down) down ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
