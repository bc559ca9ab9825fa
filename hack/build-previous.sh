#!/usr/bin/env bash
# Builds the manager of the previous release, git ref $1, into $2: the
# upgrade test (test/e2e/upgrade) runs it on the previous release's install,
# test/e2e/upgrade/testdata/previous (rendered from the same ref's config/),
# then upgrades to the current build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ref=${1:?git ref of the previous release}
out=${2:?output binary}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git -C "$root" archive "$ref" | tar -x -C "$work"
mkdir -p "$(dirname "$out")"
(cd "$work" && go build -trimpath -o "$out" ./cmd/deckhand)
echo "built $out from $ref" >&2
