#!/usr/bin/env bash
# Builds container images without Docker or a registry, with hack/k8s/image
# (go-containerregistry), into bin/images/.
#
#   hack/images.sh manager IMG   bin/images/deckhand.tar: an OCI image-layout
#                                archive holding a multi-arch image index
#                                (linux/amd64 and linux/arm64, cross-compiled
#                                with CGO_ENABLED=0): the static manager
#                                binary as /deckhand, run as 65532 (what the
#                                Dockerfile builds, without distroless).
#                                Beside it deckhand.linux-ARCH.spdx.json: each
#                                binary's SPDX SBOM, from its module list.
#                                Reproducible: SOURCE_DATE_EPOCH (default: the
#                                commit's time) dates every entry, so two
#                                builds of one commit give one index digest.
#                                PLATFORMS="linux/amd64" builds fewer.
#   hack/images.sh test          bin/images/pause.tar   $PAUSE_IMAGE
#                                bin/images/busybox.tar $BUSYBOX_IMAGE
#                                bin/images/httpd.tar   $HTTPD_IMAGE
#                                (docker-archive, linux/amd64: the real node's)
#
# `ctr images import` (hack/realnode.sh load) reads both kinds; to push the
# index, `skopeo copy --all oci-archive:bin/images/deckhand.tar docker://IMG`
# (README.md, "Verify an image").
#
# The busybox image is Debian's busybox-static (sh, sleep, httpd, nc, ...)
# and runs as nobody (65534), so that it meets Pod Security "restricted".
# The httpd image is the same with `httpd` serving /www (writable by all, so
# tests can add pages) on port 8080 as its command.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/bin/images
PAUSE_IMAGE=${PAUSE_IMAGE:-localhost/deckhand/pause:v1}
BUSYBOX_IMAGE=${BUSYBOX_IMAGE:-localhost/deckhand/busybox:v1}
HTTPD_IMAGE=${HTTPD_IMAGE:-localhost/deckhand/httpd:v1}
mkdir -p "$out" "$root/bin/image"

image() { (cd "$root/hack/k8s" && go run ./image "$@"); }

manager() {
  local img=${1:?image reference} platform platforms=(${PLATFORMS:-linux/amd64 linux/arm64})
  # The commit's time, unless the caller fixed one: a rebuild of one commit
  # gives the same bytes, a new commit a new date.
  export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)}
  local flags=()
  for platform in "${platforms[@]}"; do
    # -trimpath: no build paths in the binary; -buildvcs=false: whether
    # VCS stamping happens depends on the machine (GOFLAGS, git), so it is
    # off everywhere and the commit is in SOURCE_DATE_EPOCH and the tag.
    (cd "$root" && CGO_ENABLED=0 GOOS=${platform%/*} GOARCH=${platform#*/} \
      go build -trimpath -buildvcs=false -ldflags "-s -w -X github.com/deckhand-dev/deckhand/internal/version.Version=v$(cat VERSION)" \
        -o "bin/image/${platform/\//-}/deckhand" ./cmd/deckhand)
    flags+=(-platform "$platform")
  done
  image -o "$out/deckhand.tar" -tag "$img" -format oci "${flags[@]}" -sbom /deckhand \
    -user 65532:65532 -entrypoint /deckhand -file "/deckhand=$root/bin/image/{os}-{arch}/deckhand" -dir /tmp=1777
}

test_images() {
  (cd "$root/hack/k8s" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$root/bin/image/pause" ./pause)
  image -o "$out/pause.tar" -tag "$PAUSE_IMAGE" -user 65535:65535 -entrypoint /pause \
    -file "/pause=$root/bin/image/pause"

  local busybox=/bin/busybox
  # /bin/busybox is static only from busybox-static (Debian's busybox
  # package installs a dynamic one at the same path).
  dpkg -s busybox-static >/dev/null 2>&1 || "$root/hack/realnode.sh" deps
  local links=()
  for applet in $("$busybox" --list); do
    [ "$applet" = busybox ] || links+=(-link "/bin/$applet=busybox")
  done
  local common=(-user 65534:65534 -file "/bin/busybox=$busybox" "${links[@]}"
    -dir /tmp=1777 -dir /root=700 -dir /www=1777 -dir /home=755
    -text "/etc/passwd=root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/home:/bin/sh
" -text "/etc/group=root:x:0:
nogroup:x:65534:
")
  image -o "$out/busybox.tar" -tag "$BUSYBOX_IMAGE" -cmd sh "${common[@]}"
  image -o "$out/httpd.tar" -tag "$HTTPD_IMAGE" -entrypoint "httpd -f -v -p 8080 -h /www" "${common[@]}" \
    -text "/www/index.html=deckhand test page
"
}

case "${1:-}" in
  manager) manager "${2:-}" ;;
  test) test_images ;;
  *) echo "usage: images.sh manager IMG | test" >&2; exit 2 ;;
esac
