# Deckhand — see README.md. `make help` lists the targets.

# Pinned tool versions. The Kubernetes toolchain is pinned by hack/k8s/go.mod.
CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION    ?= v2.15.0
HELM_VERSION             ?= v3.22.0
GREMLINS_VERSION         ?= v0.6.0
# promtool is pinned by hack/promtool/go.mod (Prometheus's module version:
# v0.315.0 is Prometheus 3.15.0).
PROMTOOL_VERSION := $(shell awk '$$1 == "github.com/prometheus/prometheus" {print $$2}' hack/promtool/go.mod)

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

ROOT       := $(abspath .)
LOCALBIN   ?= $(ROOT)/bin
K8S_BIN    := $(LOCALBIN)/k8s
KUBECTL    := $(K8S_BIN)/kubectl
CONTROLLER_GEN := $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
GOLANGCI_LINT  := $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
HELM           := $(LOCALBIN)/helm-$(HELM_VERSION)
PROMTOOL       := $(LOCALBIN)/promtool-$(PROMTOOL_VERSION)
GREMLINS       := $(LOCALBIN)/gremlins-$(GREMLINS_VERSION)

# The manager image the installs reference.
VERSION := $(shell cat VERSION)
IMG ?= ghcr.io/deckhand-dev/deckhand:v$(VERSION)
# The platforms `make image` builds into its image index.
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
# The Kubernetes versions `make test-compat` tests besides the pinned one.
COMPAT_VERSIONS ?= v1.36.3 v1.35.4 v1.34.4
CONTAINER_TOOL ?= docker

# The local cluster `make cluster` and `make run` use; its kubeconfig is
# written to LOCAL_KUBECONFIG.
CLUSTER_NAME     ?= deckhand
LOCAL_KUBECONFIG ?= $(LOCALBIN)/kubeconfig

# envtest runs the pinned kube-apiserver and etcd; nothing is downloaded.
export KUBEBUILDER_ASSETS := $(K8S_BIN)
export KUBEBUILDER_CONTROLPLANE_START_TIMEOUT ?= 120s
export KWOK_WORKDIR ?= $(LOCALBIN)/kwok

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs, RBAC and webhook configurations from markers (config/ and the Helm chart).
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd:generateEmbeddedObjectMeta=true webhook paths="./..." output:crd:artifacts:config=config/crd/bases
	go run ./hack/helmsync
	go run ./hack/docgen
	go run ./hack/kindcheck

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate DeepCopy methods from markers.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./..."

.PHONY: fmt
fmt: ## Format the Go code.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run the pinned golangci-lint.
	$(GOLANGCI_LINT) run ./...

.PHONY: verify
verify: manifests generate ## Fail if gofmt, go mod tidy or generated files (CRDs, RBAC, chart copies, reference pages) are stale (the tables of kinds in README.md and docs/operations too), a docs link is broken, a user page speaks of how the project was built, the version differs anywhere, or a seeded bug of test/mutants no longer applies.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt would change:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	go mod tidy -diff
	cd hack/k8s && go mod tidy -diff
	cd hack/promtool && go mod tidy -diff
	@git diff --exit-code -- api config internal cmd charts docs/reference docs/operations docs/development/architecture.md README.md || { echo "generated files are stale: run 'make manifests generate' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api config charts docs/reference)" || { echo "untracked generated files:"; git status --porcelain -- api config charts docs/reference; exit 1; }
	go run ./hack/docscheck
	go run ./hack/release check
	go run ./hack/mutants check

.PHONY: test
test: test-unit test-e2e ## Run every test: unit and envtest integration tests, then e2e on a fresh local cluster.

.PHONY: test-unit
test-unit: k8s-tools manifests generate test-rules $(HELM) ## Unit tests and integration tests against envtest (pinned apiserver and etcd), a kind scaffolded by hack/newkind in a copy of the tree built and tested, a bounded fault-injection subset; the alert rules' tests; the image builder's (index, reproducibility, SBOM).
	go test ./... -count=1
	NEWKIND_PROOF=short go test ./hack/newkind/ -count=1 -run '^TestAScaffoldedKindNeedsNoOtherEdit$$'
	go test ./test/faults/... -tags faults -short -count=1
	go test ./test/bench/ -tags bench -skip '^TestBench$$' -count=1
	cd hack/k8s && go test ./image/ -count=1

.PHONY: test-compat
test-compat: k8s-tools manifests ## The API and one controller flow per kind on older Kubernetes minors (COMPAT_VERSIONS, default v1.36.3 v1.35.4 v1.34.4): builds each kube-apiserver from Go modules into bin/k8s-1.MINOR (minutes each, cold) and runs the envtest set against it; not part of `make test`.
	LOCALBIN=$(LOCALBIN) COMPAT_VERSIONS="$(COMPAT_VERSIONS)" hack/test-compat.sh

.PHONY: test-faults
test-faults: k8s-tools manifests generate build build-installer ## Fault injection: 10,000 randomized schedules of the scoped cache's switch; crash each controller after every write in turn (envtest), restart the apiserver and etcd and kill the leader (a local cluster it starts and removes); check invariants; prints the tables (minutes; FAULTS_SCENARIO=substring runs less).
	@mkdir -p $(LOCALBIN)/faults
	@rm -f $(LOCALBIN)/faults/table.txt $(LOCALBIN)/faults/cluster-table.txt
	SCHEDULES=10000 go test ./internal/scopedcache/ -count=1 -timeout 60m -run '^TestSchedules$$'
	HOSTILE_ALREADY_HAS=20000 go test ./test/hostile/ -count=1 -timeout 60m -run '^TestWhatATenantAlreadyHasIsBounded$$'
	FAULTS_TABLE=$(LOCALBIN)/faults/table.txt go test ./test/faults/... -tags faults -count=1 -timeout 60m -run '^TestFaults$$' || { cat $(LOCALBIN)/faults/table.txt 2>/dev/null; exit 1; }
	DECKHAND_REAL_NODE=false DECKHAND_BIN=$(LOCALBIN)/deckhand FAULTS_CLUSTER_TABLE=$(LOCALBIN)/faults/cluster-table.txt \
		go test ./test/faults/clusterfaults -tags e2e,clusterfaults -count=1 -timeout 30m -run '^(TestClusterFaults|TestSplitBrainIsCaught)$$' || { cat $(LOCALBIN)/faults/table.txt $(LOCALBIN)/faults/cluster-table.txt 2>/dev/null; exit 1; }
	@cat $(LOCALBIN)/faults/table.txt; echo; cat $(LOCALBIN)/faults/cluster-table.txt

.PHONY: test-mutants
test-mutants: k8s-tools $(GREMLINS) ## Seed each bug of test/mutants/catalogue.yaml into a copy of HEAD in turn, run the tests that should fail, print the kill rate and the survivors (MUTANTS=substring runs less; long); then test-mutants-random.
	go run ./hack/mutants run -only "$(MUTANTS)"
	$(MAKE) test-mutants-random

.PHONY: test-mutants-random
test-mutants-random: k8s-tools $(GREMLINS) ## gremlins' random mutants of the pure packages of test/mutants/random.yaml, each against its package's unit tests: print the kill rate and each survivor (RANDOM=substring of a package directory runs less; minutes).
	go run ./hack/mutants random -gremlins $(GREMLINS) -only "$(RANDOM)"

.PHONY: test-rules
test-rules: $(PROMTOOL) ## Check the alert rules (config/prometheus/alerts.yaml) and run their unit tests with the pinned promtool.
	$(PROMTOOL) check rules config/prometheus/alerts.yaml
	$(PROMTOOL) test rules config/prometheus/tests/*.yaml

.PHONY: test-e2e
test-e2e: k8s-tools manifests build build-installer image build-previous node-tools $(HELM) ## End-to-end tests on local clusters (kwok nodes and, as root, a real node) the run starts and removes; first `make release` for this machine's plugin only (dist/release), which test/e2e/readme installs as README.md says.
	$(MAKE) release PLUGIN_PLATFORMS=$$(go env GOOS)/$$(go env GOARCH)
	DECKHAND_BIN=$(LOCALBIN)/deckhand DECKHAND_PLUGIN_BIN=$(LOCALBIN)/kubectl-deckhand DECKHAND_PREVIOUS_RELEASE=$(PREVIOUS_RELEASE_DIR) DECKHAND_HELM=$(HELM) go test ./test/e2e/... -p 1 -tags e2e -count=1 -timeout 40m -v

# The release the upgrade tests start from: v0.5.0 (git tag v0.5.0), pinned
# by its commit so that a clone without tags (or a shallow one: the commit is
# fetched) makes it too. `make build-previous` runs that commit's own `make
# release` for this machine's platform into bin/previous/COMMIT, once.
PREVIOUS_RELEASE        ?= 0.5.0
PREVIOUS_RELEASE_COMMIT ?= fbd62e5ca1c3a767843aff2eec0137ead0387f8a
PREVIOUS_RELEASE_DIR    := $(LOCALBIN)/previous/$(PREVIOUS_RELEASE_COMMIT)

.PHONY: build-previous
build-previous: k8s-tools $(HELM) ## Make the previous release (PREVIOUS_RELEASE at PREVIOUS_RELEASE_COMMIT) with its own `make release` into bin/previous/COMMIT, for the upgrade tests; reused once made.
	K8S_BIN=$(K8S_BIN) HELM=$(HELM) hack/build-previous.sh $(PREVIOUS_RELEASE) $(PREVIOUS_RELEASE_COMMIT) $(PREVIOUS_RELEASE_DIR)

##@ Benchmarks

BENCH_DIR := $(LOCALBIN)/bench
# The reports the scale chart is drawn from, comma-separated, oldest first.
BENCH_CHART_IN ?= $(BENCH_DIR)/latest.json
# The manager binary the bench measures (another build, to compare two).
DECKHAND_BIN ?= $(LOCALBIN)/deckhand

.PHONY: bench
bench: k8s-tools manifests build build-installer ## Measure every kind against its alternative on a fresh local cluster (minutes; not part of test). BENCH_ROWS, BENCH_REPEAT, BENCH_SCALE, BENCH_SIZES select less; scale rows are drawn into docs/img/scale.svg.
	mkdir -p $(BENCH_DIR) docs/img
	go test -c -tags bench -o $(BENCH_DIR)/bench.test ./test/bench
	DECKHAND_BIN=$(DECKHAND_BIN) $(BENCH_DIR)/bench.test -test.run '^TestBench$$' -test.timeout 600m
	go run ./hack/benchchart -in $(BENCH_CHART_IN) -out docs/img/scale.svg

.PHONY: bench-cache
bench-cache: k8s-tools ## Measure the scoped cache's designs side by side (the switch, always cluster-wide, per namespace only) on envtest: peak RSS, CPU, pod watches, time until every needed namespace is told (CACHE_DESIGNS_PODS, _NAMESPACES, _NEEDED select less; minutes; not part of test or bench).
	mkdir -p $(BENCH_DIR)
	CACHE_DESIGNS=1 CACHE_DESIGNS_OUT=$(BENCH_DIR)/cache-designs.md go test -tags bench ./test/bench/cachedesigns/ -run '^TestBenchCacheDesigns$$' -count=1 -timeout 120m -v

##@ Local cluster

.PHONY: cluster
cluster: k8s-tools image node-tools ## Start the local cluster: 3 kwok nodes and, where root can, a real node; harmless when it already runs.
	hack/cluster.sh up $(CLUSTER_NAME) $(LOCAL_KUBECONFIG)

.PHONY: cluster-down
cluster-down: k8s-tools ## Remove the local cluster, its real node's kubelet and containerd and their state.
	hack/cluster.sh down $(CLUSTER_NAME) $(LOCAL_KUBECONFIG)

.PHONY: install
install: manifests k8s-tools ## Install the CRDs into the cluster KUBECONFIG points at.
	hack/install.sh

.PHONY: uninstall
uninstall: manifests k8s-tools ## Remove the CRDs (and with them every Deckhand object) from the cluster.
	$(KUBECTL) delete --ignore-not-found -k config/crd

.PHONY: run
run: build k8s-tools manifests image node-tools ## Run Deckhand against KUBECONFIG (CHANGE_CLUSTER=yes lets it point that cluster's CRDs and webhooks at it), or the local cluster (started if needed); ARGS="--flag ..." and ENABLE_WEBHOOKS=false are passed on.
	ARGS="$(ARGS)" ENABLE_WEBHOOKS="$(ENABLE_WEBHOOKS)" CHANGE_CLUSTER="$(CHANGE_CLUSTER)" hack/run.sh

##@ Build

.PHONY: build
build: ## Build the manager binary into bin/deckhand and the kubectl plugin into bin/kubectl-deckhand.
	go build -trimpath -ldflags "-X github.com/deckhand-dev/deckhand/internal/version.Version=v$(VERSION)" -o $(LOCALBIN)/deckhand ./cmd/deckhand
	go build -trimpath -ldflags "-X github.com/deckhand-dev/deckhand/internal/version.Version=v$(VERSION)" -o $(LOCALBIN)/kubectl-deckhand ./cmd/kubectl-deckhand

.PHONY: image
image: ## Build the manager image IMG without Docker: bin/images/deckhand.tar (OCI archive, a linux/amd64 + linux/arm64 index, reproducible) and an SPDX SBOM per platform beside it.
	PLATFORMS="$(IMAGE_PLATFORMS)" hack/images.sh manager $(IMG)

.PHONY: test-images
test-images: ## Build the real node's test images: bin/images/pause.tar, busybox.tar and httpd.tar (busybox-static).
	hack/images.sh test

.PHONY: image-load
image-load: image ## Import bin/images/*.tar into the local cluster's real node (after `make cluster`).
	hack/realnode.sh load $(CLUSTER_NAME) bin/images/*.tar

.PHONY: docker-build
docker-build: ## Build the manager image IMG with a Docker engine (this dev machine has none: use `make image`).
	$(CONTAINER_TOOL) build -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the manager image IMG.
	$(CONTAINER_TOOL) push $(IMG)

##@ Release

RELEASE_DIR := dist/release/v$(VERSION)
# The platforms of the kubectl plugin a release carries (the krew manifest
# names each).
PLUGIN_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64

.PHONY: release
release: manifests k8s-tools $(HELM) ## Write the release of VERSION into dist/release/vVERSION: install.yaml, the Helm chart, the image (OCI archive) and its SBOMs, kubectl-deckhand per platform with a krew manifest, SHA256SUMS.
	go run ./hack/release check
	rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR)
	hack/build-installer.sh $(IMG) $(RELEASE_DIR)/install.yaml
	$(HELM) package charts/deckhand -d $(RELEASE_DIR)
	PLATFORMS="$(IMAGE_PLATFORMS)" hack/images.sh manager $(IMG)
	cp bin/images/deckhand.tar bin/images/deckhand.linux-*.spdx.json $(RELEASE_DIR)/
	for platform in $(PLUGIN_PLATFORMS); do \
	  os=$${platform%/*}; arch=$${platform#*/}; out=$$(mktemp -d); \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags "-X github.com/deckhand-dev/deckhand/internal/version.Version=v$(VERSION)" -o $$out/kubectl-deckhand ./cmd/kubectl-deckhand; \
	  tar -C $$out --owner=0 --group=0 --mtime=@0 -czf $(RELEASE_DIR)/kubectl-deckhand_$${os}_$${arch}.tar.gz kubectl-deckhand; rm -rf $$out; \
	done
	go run ./hack/release krew $(RELEASE_DIR)
	cd $(RELEASE_DIR) && sha256sum -- * > SHA256SUMS
	@echo "release v$(VERSION) in $(RELEASE_DIR)"

##@ Deployment

.PHONY: build-installer
build-installer: manifests k8s-tools ## Write dist/install.yaml: CRDs, RBAC, webhooks and the manager for image IMG.
	hack/build-installer.sh $(IMG) dist/install.yaml

.PHONY: deploy
deploy: build-installer ## Install Deckhand (dist/install.yaml) in the cluster KUBECONFIG names.
	$(KUBECTL) apply --server-side --force-conflicts -f dist/install.yaml

.PHONY: undeploy
undeploy: k8s-tools ## Remove Deckhand, its CRDs and every Deckhand object from the cluster.
	$(KUBECTL) delete --ignore-not-found -f dist/install.yaml

.PHONY: helm-lint
helm-lint: $(HELM) ## Lint the Helm chart.
	$(HELM) lint charts/deckhand

##@ Tools

.PHONY: tools
tools: k8s-tools $(CONTROLLER_GEN) $(GOLANGCI_LINT) $(HELM) $(PROMTOOL) $(GREMLINS) ## Build every pinned tool into bin/ (minutes the first time, seconds after).

.PHONY: node-tools
node-tools: ## As root: install containerd, runc, CNI plugins, busybox-static; build the kubelet and metrics-server (bin/node) and the test images.
	hack/realnode.sh prepare || echo "the real node is not prepared: 'make cluster' will say why" >&2

.PHONY: k8s-tools
k8s-tools: $(K8S_BIN)/.built ## Build the pinned Kubernetes control plane, kubectl, etcd and kwok into bin/k8s.

$(K8S_BIN)/.built: hack/k8s/go.mod hack/k8s/go.sum hack/k8s/build.sh hack/k8s/ldflags.sh
	hack/k8s/build.sh $(K8S_BIN)
	touch $@

$(CONTROLLER_GEN):
	GOBIN=$(LOCALBIN)/.gobin go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(LOCALBIN)/.gobin/controller-gen $@

$(GOLANGCI_LINT):
	GOBIN=$(LOCALBIN)/.gobin go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(LOCALBIN)/.gobin/golangci-lint $@

$(HELM):
	GOBIN=$(LOCALBIN)/.gobin go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(LOCALBIN)/.gobin/helm $@

$(GREMLINS):
	GOBIN=$(LOCALBIN)/.gobin go install github.com/go-gremlins/gremlins/cmd/gremlins@$(GREMLINS_VERSION)
	mv $(LOCALBIN)/.gobin/gremlins $@

# Not `go install ...@version`: Prometheus's go.mod has a replace directive,
# which go install refuses; hack/promtool repeats it.
$(PROMTOOL):
	cd hack/promtool && go build -trimpath -o $@ github.com/prometheus/prometheus/cmd/promtool
