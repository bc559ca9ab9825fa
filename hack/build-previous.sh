#!/usr/bin/env bash
# Makes the previous release, version $1 at commit $2, into directory $3 the
# way it was released: that commit's own `make release`, run in a copy of the
# commit (git archive), for this machine's platform only. The upgrade tests
# (test/e2e/upgrade, test/e2e/upgrade/helm) install it from what it wrote, as
# a user would, then upgrade to the current build.
#
#   $3/release/          what `make release` wrote (install.yaml, the chart
#                        package deckhand-VERSION.tgz, the image archive for
#                        linux/ARCH and its SBOM, kubectl-deckhand for this
#                        platform, the krew manifest, SHA256SUMS)
#   $3/deckhand          the manager binary the release's image holds (the
#                        tests run the manager on the host)
#   $3/webhook-manifests.yaml  the commit's config/webhook/manifests.yaml (to
#                        point its webhooks at that host process)
#   $3/.complete         "vVERSION COMMIT", written last
#
# $3 is keyed by the commit: when it is complete, nothing is built again.
# Only what the commit's `make release` builds from source is built: the
# generated files are taken as committed (its `make manifests` is not
# rerun: the commit's `make verify` held them current) and the Kubernetes
# toolchain (kubectl, for kustomize) and helm are this checkout's, $K8S_BIN
# and $HELM.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=${1:?version of the previous release, e.g. 0.5.0}
commit=${2:?commit of the previous release}
out=${3:?output directory}
k8s_bin=${K8S_BIN:-$root/bin/k8s}
helm=${HELM:?path of helm}

if [ -f "$out/.complete" ]; then
  echo "build-previous: v$version ($commit) already in $out" >&2
  exit 0
fi
if ! git -C "$root" cat-file -e "$commit^{commit}" 2>/dev/null; then
  # A shallow clone (as some CI systems make) lacks the older commit: fetch
  # just that one from origin.
  git -C "$root" fetch --quiet --depth=1 origin "$commit" 2>/dev/null || true
fi
if ! git -C "$root" cat-file -e "$commit^{commit}" 2>/dev/null; then
  echo "build-previous: commit $commit (v$version, the previous release) is not in this clone and origin did not provide it;" >&2
  echo "build-previous: the upgrade tests will skip. Run 'git fetch --unshallow' to run them." >&2
  exit 0
fi
# The tag, where the clone has it, must name the pinned commit.
if tagged=$(git -C "$root" rev-parse -q --verify "refs/tags/v$version^{commit}" 2>/dev/null) &&
  [ "$tagged" != "$(git -C "$root" rev-parse "$commit^{commit}")" ]; then
  echo "build-previous: tag v$version is $tagged, not the pinned $commit" >&2
  exit 1
fi

start=$SECONDS
work=$(mktemp -d)
part="$out.partial.$$"
trap 'rm -rf "$work" "$part"' EXIT
git -C "$root" archive "$commit" | tar -x -C "$work"
if [ "$(cat "$work/VERSION")" != "$version" ]; then
  echo "build-previous: VERSION at $commit says $(cat "$work/VERSION"), not $version" >&2
  exit 1
fi
mkdir -p "$work/bin"
ln -s "$k8s_bin" "$work/bin/k8s"
os=$(go env GOOS) arch=$(go env GOARCH)
# -o: the Makefile's prerequisites that would regenerate committed files or
# rebuild the shared toolchain (its files are all newer than bin/k8s in a
# fresh copy) are taken as made. SOURCE_DATE_EPOCH: the commit's time, as
# in a clone of it (the copy has no git history to read it from).
# No MAKEFLAGS: variables given to this checkout's make (VERSION=...) are
# not the previous release's.
SOURCE_DATE_EPOCH=$(git -C "$root" show -s --format=%ct "$commit") \
  env -u MAKEFLAGS -u MAKEOVERRIDES -u MFLAGS -u MAKELEVEL make -C "$work" --no-print-directory release \
  -o manifests -o "$work/bin/k8s/.built" -o "$helm" \
  LOCALBIN="$work/bin" HELM="$helm" \
  IMAGE_PLATFORMS="linux/$arch" PLUGIN_PLATFORMS="$os/$arch" >&2
rel="$work/dist/release/v$version"
(cd "$rel" && sha256sum --quiet -c SHA256SUMS)
mkdir -p "$part"
cp -r "$rel" "$part/release"
cp "$work/bin/image/linux-$arch/deckhand" "$part/deckhand"
cp "$work/config/webhook/manifests.yaml" "$part/webhook-manifests.yaml"
echo "v$version $commit" > "$part/.complete"
rm -rf "$out"
mv "$part" "$out"
echo "build-previous: made v$version ($commit) with its own make release into $out in $((SECONDS - start)) s" >&2
