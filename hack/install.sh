#!/usr/bin/env bash
# Installs (or updates) Deckhand's CRDs in the cluster KUBECONFIG names.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kubectl=$root/bin/k8s/kubectl
crds=$("$kubectl" kustomize "$root/config/crd")
if [ -z "$crds" ]; then
  echo "no CRDs to install" >&2
  exit 0
fi
# DECKHAND_CONVERSION_HOST/PORT (set by `make run`): the conversion webhook
# is served by a manager outside the cluster. The CRDs are applied pointed at
# it, not at the in-cluster Service: applied with the Service over CRDs an
# earlier run pointed at the manager, a CRD would hold both and be refused.
if [ -n "${DECKHAND_CONVERSION_PORT:-}" ]; then
  crds=$(printf '%s\n' "$crds" | (cd "$root" && go run ./hack/devwebhook -crds -host "${DECKHAND_CONVERSION_HOST:-127.0.0.1}" -port "$DECKHAND_CONVERSION_PORT"))
fi
printf '%s\n' "$crds" | "$kubectl" apply --server-side --force-conflicts -f -
# kubectl wait fails outright on a CRD that has no conditions yet: retry.
for _ in $(seq 1 30); do
  printf '%s\n' "$crds" | "$kubectl" wait --for=condition=Established --timeout=60s -f - >/dev/null 2>&1 && exit 0
  sleep 1
done
echo "CRDs did not become Established" >&2
exit 1
