# Deckhand's manager image: a static binary on distroless, as non-root.
# Build: make docker-build IMG=<registry>/deckhand:<tag>
FROM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
WORKDIR /workspace

# Dependencies first, so a code change does not re-download modules.
COPY go.mod go.sum ./
RUN go mod download

COPY cmd/ cmd/
COPY api/ api/
COPY internal/ internal/

RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w" -o deckhand ./cmd/deckhand

FROM gcr.io/distroless/static:nonroot
WORKDIR /
COPY --from=builder /workspace/deckhand .
USER 65532:65532
ENTRYPOINT ["/deckhand"]
