# Deckhand's manager image: a static binary on distroless, as non-root.
# Build: make docker-build IMG=<registry>/deckhand:<tag>
# Multi-arch: docker buildx build --platform linux/amd64,linux/arm64 -t IMG .
# (the builder runs on the build machine and cross-compiles; no emulation).
# Without Docker, `make image` builds the same binary into a reproducible
# OCI index for both platforms (hack/images.sh).
#
# Both base images are pinned by digest (the digest of the multi-arch index,
# so every platform resolves from it), not by a tag that can move under a
# release. The digests were taken in November 2026 from public Dockerfiles
# pinning golang:1.26.8 and gcr.io/distroless/static:nonroot (Renovate- and
# Dependabot-maintained); this machine cannot pull, so they were not
# re-resolved here. To refresh, resolve the tags and replace the digests:
#   go run github.com/google/go-containerregistry/cmd/crane@v0.20.7 digest golang:1.26.8
#   go run github.com/google/go-containerregistry/cmd/crane@v0.20.7 digest gcr.io/distroless/static:nonroot
# (or `docker buildx imagetools inspect TAG`). Keep golang's tag at the Go
# version of go.mod's toolchain.
FROM --platform=$BUILDPLATFORM golang:1.26.8@sha256:2dbae744204892730b7032501f5973360ce57cfe118a194b338a97b5aa2d40cc AS builder
ARG TARGETOS
ARG TARGETARCH
WORKDIR /workspace

# Dependencies first, so a code change does not re-download modules.
COPY go.mod go.sum ./
RUN go mod download

COPY cmd/ cmd/
COPY api/ api/
COPY internal/ internal/

# The same flags as hack/images.sh: no build paths, no VCS stamp.
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -buildvcs=false -ldflags="-s -w" -o deckhand ./cmd/deckhand

FROM gcr.io/distroless/static:nonroot@sha256:e2e927ec666bae08560abb3c55d0659eceabb657f56b6782ab500a9fc7f555e3
WORKDIR /
COPY --from=builder /workspace/deckhand .
USER 65532:65532
ENTRYPOINT ["/deckhand"]
