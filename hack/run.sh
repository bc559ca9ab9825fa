#!/usr/bin/env bash
# `make run`: runs Deckhand in the foreground against the cluster KUBECONFIG
# (or the current kubectl context) names, or, when there is none, against the
# local kwok cluster, started first if needed. Extra manager flags can be
# given in DECKHAND_FLAGS.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/bin
kubectl=$bin/k8s/kubectl

if [ -z "${KUBECONFIG:-}" ] && ! "$kubectl" config current-context >/dev/null 2>&1; then
  export KUBECONFIG=$bin/kubeconfig
  "$root/hack/cluster.sh" up "${CLUSTER_NAME:-deckhand}" "$KUBECONFIG"
  local_cluster=true
fi
context=$("$kubectl" config current-context 2>/dev/null || echo "?")
echo "Deckhand runs against context '$context' (KUBECONFIG=${KUBECONFIG:-~/.kube/config})." >&2

# The CRDs, and the namespace that holds the leader-election Lease.
"$root/hack/install.sh"
namespace=${DECKHAND_NAMESPACE:-deckhand-system}
"$kubectl" create namespace "$namespace" --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null

if [ "${local_cluster:-}" = true ]; then
  cat >&2 <<MSG

Reach the local cluster from another shell with the project's kubectl:
  export KUBECONFIG=$KUBECONFIG
  $kubectl get nodes
The kwok nodes only pretend to run pods; pods that tolerate the taint
deckhand.dev/real-node (if 'real-node' is listed) really run (README.md,
"The local cluster"). Stop it all with 'make cluster-down'.

MSG
fi

# Webhook configurations that call the manager on 127.0.0.1; the manager
# issues its certificate for that address and injects the CA itself.
(cd "$root" && go run ./hack/devwebhook -host 127.0.0.1 -port 9443)

# Local listeners bind to loopback only.
# shellcheck disable=SC2086 # DECKHAND_FLAGS is a list of flags
exec "$bin/deckhand" \
  --leader-elect \
  --namespace "$namespace" \
  --metrics-bind-address 127.0.0.1:8443 \
  --health-probe-bind-address 127.0.0.1:8081 \
  --webhook-host 127.0.0.1 \
  --webhook-port 9443 \
  --webhook-cert-dir "$bin/webhook-certs" \
  --webhook-cert-hosts 127.0.0.1 \
  --zap-log-level "${LOG_LEVEL:-info}" \
  ${DECKHAND_FLAGS:-}
