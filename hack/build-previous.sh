#!/usr/bin/env bash
# Builds the manager of the previous release, git ref $1, into $2: the
# upgrade test (test/e2e/upgrade) runs it on the previous release's install,
# test/e2e/upgrade/testdata/previous (rendered from the same ref's config/),
# then upgrades to the current build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ref=${1:?git ref of the previous release}
out=${2:?output binary}
if ! git -C "$root" cat-file -e "$ref^{commit}" 2>/dev/null; then
  # A shallow clone (as some CI systems make) lacks the older commit: fetch
  # just that one from origin.
  git -C "$root" fetch --quiet --depth=1 origin "$ref" 2>/dev/null || true
fi
if ! git -C "$root" cat-file -e "$ref^{commit}" 2>/dev/null; then
  echo "build-previous: git ref $ref (the previous release) is not in this clone and origin did not provide it;" >&2
  echo "build-previous: the upgrade tests will skip. Run 'git fetch --unshallow' to run them." >&2
  rm -f "$out"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git -C "$root" archive "$ref" | tar -x -C "$work"
mkdir -p "$(dirname "$out")"
(cd "$work" && go build -trimpath -o "$out" ./cmd/deckhand)
echo "built $out from $ref" >&2
