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
printf '%s\n' "$crds" | "$kubectl" apply --server-side --force-conflicts -f -
# kubectl wait fails outright on a CRD that has no conditions yet: retry.
for _ in $(seq 1 30); do
  printf '%s\n' "$crds" | "$kubectl" wait --for=condition=Established --timeout=60s -f - >/dev/null 2>&1 && exit 0
  sleep 1
done
echo "CRDs did not become Established" >&2
exit 1
