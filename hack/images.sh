#!/usr/bin/env bash
# Builds container images without Docker or a registry: single-layer
# docker-archive tars in bin/images/, made by hack/k8s/image
# (go-containerregistry). `ctr images import` and `docker load` read them.
#
#   hack/images.sh manager IMG   bin/images/deckhand.tar: the static manager
#                                binary as /deckhand, run as 65532 (what the
#                                Dockerfile builds, without distroless)
#   hack/images.sh test          bin/images/pause.tar   $PAUSE_IMAGE
#                                bin/images/busybox.tar $BUSYBOX_IMAGE
#                                bin/images/httpd.tar   $HTTPD_IMAGE
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
  local img=${1:?image reference}
  (cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/image/deckhand ./cmd/deckhand)
  image -o "$out/deckhand.tar" -tag "$img" -user 65532:65532 -entrypoint /deckhand \
    -file "/deckhand=$root/bin/image/deckhand" -dir /tmp=1777
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
