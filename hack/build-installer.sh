#!/usr/bin/env bash
# Renders config/default with the manager image set to $1 into $2
# (dist/install.yaml): the single-file install.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
img=${1:?image}
out=${2:?output file}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Set the image in a throwaway overlay, so config/ stays as committed.
cat > "$work/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to="$work" "$root/config/default")
images:
  - name: ghcr.io/deckhand-dev/deckhand
    newName: ${img%:*}
    newTag: ${img##*:}
YAML
mkdir -p "$(dirname "$out")"
"$root/bin/k8s/kubectl" kustomize "$work" > "$out"
echo "wrote $out ($(grep -c '^kind:' "$out") objects, image $img)" >&2
