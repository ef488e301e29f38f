# agentplane — developer entry points. `make help` lists them.
#
# Everything that needs building is built through the Go module proxy and
# cached under $(CACHE), keyed by version, so a second run is fast.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

CACHE ?= $(HOME)/.cache/agentplane
export AGENTPLANE_CACHE := $(CACHE)
TOOLBIN := $(CACHE)/bin

# Pinned tool versions. A version bump changes the cache key.
CONTROLLER_TOOLS_VERSION := v0.23.0
GOLANGCI_LINT_VERSION := v2.15.0
BUF_VERSION := v1.75.0
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2

# What binaries and images are stamped with. BUILD_DATE is the commit time,
# not the clock, so two builds of one commit are byte for byte the same.
VERSION := $(shell cat $(CURDIR)/VERSION)
REVISION := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILD_DATE := $(shell git log -1 --format=%cI 2>/dev/null || echo 1970-01-01T00:00:00Z)
LDFLAGS := -s -w -buildid= -X github.com/agentplane/agentplane/libs/service.version=$(VERSION) -X github.com/agentplane/agentplane/libs/service.revision=$(REVISION) -X github.com/agentplane/agentplane/libs/service.buildDate=$(BUILD_DATE)

# Every module of go.work, as paths relative to the repository root.
MODULES := $(shell go list -m -f "{{.Dir}}" | sed "s|^$(CURDIR)/||")
KUBESTACK := $(TOOLBIN)/kubestack
KUBEBUILD := $(TOOLBIN)/kubebuild

GOLANGCI_LINT := $(TOOLBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
BUF := $(TOOLBIN)/buf-$(BUF_VERSION)
PROTOC_GEN_GO := $(TOOLBIN)/protoc-gen-go-$(PROTOC_GEN_GO_VERSION)
PROTOC_GEN_GO_GRPC := $(TOOLBIN)/protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION)

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-18s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build every module.
	@for m in $(MODULES); do (cd $$m && go build ./...); done

.PHONY: kubestack
kubestack:
	@go build -o $(KUBESTACK) ./tools/kubestack

# kubebuild is `kubestack assets` alone: it compiles in seconds where
# kubestack (client-go, localnode) takes minutes on a cold machine, so the
# long build starts at once. It prints the binaries' directory.
.PHONY: kube-binaries
kube-binaries: ## Build (once, cached) etcd, kube-apiserver, kube-controller-manager and kubectl.
	@go build -o $(KUBEBUILD) ./tools/kubestack/kubebuild && $(KUBEBUILD) >/dev/null

.PHONY: prometheus
prometheus: ## Install Prometheus and promtool (Debian's prometheus package) when missing: tests/observability runs them.
	@if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then \
	  echo "installing Debian's prometheus package (the observability suite's server and promtool)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; \
	fi

.PHONY: test-rules
test-rules: prometheus ## Check the alert rules and run their unit tests with promtool (seconds).
	@promtool check rules deploy/prometheus/*.rules.yaml
	@promtool test rules deploy/prometheus/tests/*.test.yaml

.PHONY: test
test: kube-binaries images prometheus ## Run unit and integration tests against a real control plane (and the install suite on the images).
	@assets="$$($(KUBEBUILD))"; \
	for m in $(MODULES); do \
	  echo "== go test $$m"; \
	  flags='$(TEST_FLAGS)'; if [ "$$m" = tests ]; then flags='$(TEST_FLAGS_tests)'; fi; \
	  (cd $$m && KUBEBUILDER_ASSETS="$$assets" go test -count=1 $$flags ./...); \
	done

# The race detector is on for the services, libs and tools: most packages
# run goroutines (a controller's workers, informers, the supervisor's
# streams). TEST_FLAGS= turns it off for a quicker local run. Suites that
# build binaries in TestMain can pass go test's default 10 min on a cold,
# loaded machine. The tests/ module is the exception: its suites drive the
# services as separate processes and containers, built without the race
# detector, so there it would instrument only the harness, at twice the
# compile time (the Helm SDK, testcontainers, client-go).
TEST_FLAGS ?= -race -timeout 30m
TEST_FLAGS_tests ?= -timeout 30m

.PHONY: test-unit
test-unit: ## Run the tests that need no control plane (hack/unit-packages.sh picks them), in about a minute.
	@for m in $(MODULES); do \
	  pkgs="$$(cd $$m && $(CURDIR)/hack/unit-packages.sh)"; \
	  if [ -n "$$pkgs" ]; then echo "== go test $$m (unit)"; (cd $$m && go test -count=1 $$pkgs); fi; \
	done

.PHONY: verify-tidy
verify-tidy: ## Fail when a module's go.mod or go.sum differs from what go mod tidy writes.
	@for m in $(MODULES); do \
	  (cd $$m && go mod tidy -diff >/dev/null 2>&1) || { echo "$$m is not tidy; run 'go mod tidy' in it:"; (cd $$m && go mod tidy -diff) || true; exit 1; }; \
	done

# What `make breaking` compares proto/ with (a buf git input): by default
# main, or on main itself the commit before, so a change that lands on main
# is checked against what was there.
BUF_AGAINST ?=

.PHONY: breaking
breaking: $(BUF) ## Fail when proto/ breaks a wire contract of main (buf breaking, FILE rules).
	@against='$(BUF_AGAINST)'; if [ -z "$$against" ]; then \
	  if [ "$$(git rev-parse --abbrev-ref HEAD)" = main ]; then against='.git#ref=HEAD~1'; else against='.git#branch=main'; fi; fi; \
	echo "buf breaking against $$against"; cd proto && $(BUF) breaking --against "../$$against,subdir=proto"

.PHONY: generate
generate: generate-api generate-proto helm-crds helm-rules generate-dashboards generate-docs ## Regenerate deepcopy, CRDs, protobuf code, the Grafana dashboards, the charts' alert rules and the docs' flag tables.

.PHONY: generate-api
generate-api: ## Regenerate deepcopy functions and CRD YAML with controller-gen.
	go run sigs.k8s.io/controller-tools/cmd/controller-gen object:headerFile=hack/boilerplate.go.txt paths=./libs/api/...
	go run sigs.k8s.io/controller-tools/cmd/controller-gen crd:generateEmbeddedObjectMeta=true paths=./libs/api/... output:crd:artifacts:config=deploy/crds
	@# The Station's pod template carries Kubernetes' full schema; its upstream
	@# descriptions alone would pass kubectl apply's 256 KiB annotation limit.
	@# The lists its CEL rules walk are capped, or admission prices the rules
	@# past its cost budget (libs/api/agents/v1alpha1/station_types.go).
	go run ./tools/crdtrim deploy/crds/agents.re-cinq.com_stations.yaml spec.template \
	  spec.template.spec.containers=64 spec.template.spec.initContainers=64 \
	  'spec.template.spec.containers[].ports=128' 'spec.template.spec.initContainers[].ports=128' \
	  spec.template.spec.volumes=256 'spec.template.spec.volumes[].projected.sources=64'

.PHONY: generate-proto
generate-proto: $(BUF) $(PROTOC_GEN_GO) $(PROTOC_GEN_GO_GRPC) ## Regenerate protobuf Go code with buf.
	cd proto && PATH="$(TOOLBIN)/plugins:$$PATH" $(BUF) generate

.PHONY: helm-crds
helm-crds: ## Copy the generated CRDs (deploy/crds) into the agentplane Helm chart.
	rm -f helm/agentplane/files/crds/*.yaml
	mkdir -p helm/agentplane/files/crds && cp deploy/crds/*.yaml helm/agentplane/files/crds/

.PHONY: helm-rules
helm-rules: ## Copy each service's alert rules (deploy/prometheus) into its Helm chart.
	@for svc in agent-controller batch-poller realtime-gateway omnia-controllers; do \
	  mkdir -p helm/$$svc/files/prometheus && cp deploy/prometheus/$$svc.rules.yaml helm/$$svc/files/prometheus/; \
	done

.PHONY: generate-dashboards
generate-dashboards: ## Write the Grafana dashboards (tools/dashboards) into deploy/dashboards and each chart's files/dashboards.
	go run ./tools/dashboards -out deploy/dashboards -helm helm

.PHONY: generate-docs
generate-docs: ## Rewrite each service's flag table in docs/ from its flag definitions.
	@# Only the packages holding the docs test: go test ./... would compile
	@# every test binary of every service for one test each.
	@for m in $(filter services/%,$(MODULES)); do \
	  pkgs="$$(cd $$m && grep -rl --include='*_test.go' 'func TestTheDocsListEveryFlag' . | xargs -n1 dirname | sort -u)"; \
	  (cd $$m && AGENTPLANE_UPDATE_DOCS=1 go test -count=1 -run '^TestTheDocsListEveryFlag$$' $$pkgs >/dev/null); \
	done

.PHONY: verify-generate
verify-generate: generate ## Fail when generated files differ from the committed ones.
	@if [ -n "$$(git status --porcelain -- libs deploy proto helm docs)" ]; then \
	  echo "generated files are out of date; run 'make generate' and commit:"; \
	  git status --porcelain -- libs deploy proto helm docs; git --no-pager diff --stat -- libs deploy proto helm docs; exit 1; fi

.PHONY: lint
lint: $(GOLANGCI_LINT) $(BUF) ## gofmt, go vet, golangci-lint and buf lint.
	@bad="$$(gofmt -l $(MODULES))"; if [ -n "$$bad" ]; then echo "gofmt needed:"; echo "$$bad"; exit 1; fi
	@for m in $(MODULES); do (cd $$m && go vet ./... && $(GOLANGCI_LINT) run --allow-parallel-runners ./...); done
	cd proto && $(BUF) lint

.PHONY: test-containers
test-containers: kube-binaries images ## Run the fault suites (tests/containers): the images and the control plane as Docker containers, killed, paused and cut off, at the size CI runs.
	cd tests && go test -count=1 -timeout 30m -v ./containers/...

CHAOS_OUT ?= $(CACHE)/chaos/latest.md
.PHONY: chaos
chaos: kube-binaries images ## Run the fault suites at full size (AGENTPLANE_CHAOS=1); figures go to $(CHAOS_OUT).
	@mkdir -p $(dir $(CHAOS_OUT)) && : > $(CHAOS_OUT)
	cd tests && AGENTPLANE_CHAOS=1 AGENTPLANE_BENCH_OUT=$(CHAOS_OUT) go test -count=1 -timeout 90m -v ./containers/...

BENCH_N ?= 1000
BENCH_OUT ?= $(CACHE)/bench/latest.md
# The memory limit agent-controller's 10,000-run benchmark runs it under, as
# a container with that limit would (its Go soft limit at 90 %); empty runs
# it unlimited.
BENCH_MEMORY_LIMIT ?=
.PHONY: bench
bench: kube-binaries ## Run the benchmarks; figures go to $(BENCH_OUT) (copy them into docs/benchmarks.md).
	@mkdir -p $(dir $(BENCH_OUT)) && : > $(BENCH_OUT)
	@assets="$$($(KUBEBUILD))"; \
	for m in $(MODULES); do \
	  (cd $$m && KUBEBUILDER_ASSETS="$$assets" AGENTPLANE_BENCH=1 AGENTPLANE_BENCH_N=$(BENCH_N) AGENTPLANE_BENCH_OUT=$(BENCH_OUT) \
	    AGENTPLANE_BENCH_MEMORY_LIMIT=$(BENCH_MEMORY_LIMIT) \
	    go test -count=1 -timeout 60m -run '^TestBench' -bench . -benchtime 2s ./... | grep -E '^(Benchmark|ok|FAIL|---)' || true); \
	done
	@echo; echo "== $(BENCH_OUT)"; cat $(BENCH_OUT)

FUZZTIME ?= 30s
.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each.
	@for m in $(MODULES); do \
	  (cd $$m && for pkg in $$(go list ./...); do \
	    for f in $$(go test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz' || true); do \
	      echo "== $$pkg $$f"; go test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s $$pkg; \
	    done; done); done

DEMO_BIN := $(CACHE)/demo/bin
# What `make demo` builds while the control plane builds: the images the
# platform runs from (no docker load: localnode runs them from the image
# store) and the host binaries the demo runs itself. Each step is timed.
.PHONY: demo
demo: ## Install the platform locally with its Helm chart and images, and show it at work: Job, batch, realtime and Omnia runs, Prometheus figures.
	@$(MAKE) --no-print-directory prometheus || echo "Prometheus could not be installed; the demo goes on without it"
	@mkdir -p $(DEMO_BIN) $(CACHE)/demo/build
	@timed() { local what=$$1 s e rc=0; shift; s=$$(date +%s); "$$@" || rc=$$?; e=$$(date +%s); \
	  echo "make demo: $$what took $$((e-s))s (rc=$$rc)"; return $$rc; }; \
	  s=$$(date +%s); echo "make demo: building the control plane, the images and the demo's binaries in parallel"; \
	  timed "control plane (kube-binaries)" $(MAKE) --no-print-directory kube-binaries & kb=$$!; \
	  timed "images (make images)" $(MAKE) --no-print-directory images IMAGES_DOCKER_LOAD=0 > $(CACHE)/demo/build/images.log 2>&1 & im=$$!; \
	  timed "host binaries (kubestack, demo, agentctl)" env CGO_ENABLED=0 go build -o $(DEMO_BIN)/ ./tools/kubestack ./tools/demo ./tools/agentctl & hb=$$!; \
	  rc=0; wait $$hb || rc=1; wait $$im && sed -n 's/^  /  images: /p' $(CACHE)/demo/build/images.log || { rc=1; echo "make images failed:"; tail -20 $(CACHE)/demo/build/images.log; }; wait $$kb || rc=1; \
	  echo "make demo: built in $$(( $$(date +%s) - s ))s (the images' log: $(CACHE)/demo/build/images.log)"; exit $$rc
	@s=$$(date +%s); $(DEMO_BIN)/demo up --bin $(DEMO_BIN) --repo $(CURDIR) --images $(IMAGES_DIR); rc=$$?; \
	  echo "make demo: demo up took $$(( $$(date +%s) - s ))s (rc=$$rc)"; exit $$rc

.PHONY: demo-down
demo-down: ## Stop everything make demo started and remove its state.
	@if [ -x $(DEMO_BIN)/demo ]; then $(DEMO_BIN)/demo down --bin $(DEMO_BIN); else $(MAKE) --no-print-directory kubestack-down; fi

.PHONY: kubestack-up
kubestack-up: kubestack ## Start etcd, kube-apiserver and kube-controller-manager on loopback.
	@$(KUBESTACK) up

.PHONY: kubestack-down
kubestack-down: kubestack ## Stop the local control plane and remove its state.
	@$(KUBESTACK) down

# One image per service and tool, built without a base image by
# tools/imagebuild (docs/images.md). IMAGE_FLAGS_<name> adds imagebuild flags;
# IMAGE_FILES_<name> replaces the default `--binary bin/<name>=/<name>`.
IMAGES_DIR := $(CACHE)/images
IMAGES_BIN := $(IMAGES_DIR)/bin
IMAGEBUILD := $(IMAGES_DIR)/tool/imagebuild
IMAGE_REPO ?= agentplane
IMAGE_ARCH ?= $(shell go env GOARCH)
# Exactly the Go of go.work: another compiler gives other binaries, so other digests.
IMAGE_GOTOOLCHAIN ?= go$(shell sed -n 's/^go //p' $(CURDIR)/go.work)
# A directory here makes imagebuild also write an OCI layout per image into it.
IMAGES_OCI ?=
IMAGES := agent-controller batch-poller realtime-gateway omnia-controllers supervisor fakevendor mockagent nats
IMAGE_PKGS := ./services/agent-controller ./services/batch-poller ./services/realtime-gateway \
  ./services/omnia-controllers/cmd/omnia-controllers ./services/supervisor \
  ./tools/fakevendor/cmd/fakevendor ./tools/mockagent github.com/nats-io/nats-server/v2
# Every service serves /metrics on 8080 and probes on 8081 (libs/service); two add gRPC.
IMAGE_FLAGS_agent-controller := --port 8080 --port 8081
IMAGE_FLAGS_batch-poller := --port 9090 --port 8080 --port 8081
IMAGE_FLAGS_realtime-gateway := --port 9443 --port 8080 --port 8081
IMAGE_FLAGS_omnia-controllers := --port 8080 --port 8081
# fakevendor listens on loopback by default, which a container cannot reach.
IMAGE_FLAGS_fakevendor := --cmd=--addr=:8089 --port 8089
# NATS for the demo (the version tools/go.mod requires), with JetStream
# stored under /data (an emptyDir in the demo's pod).
IMAGE_FILES_nats := --binary $(IMAGES_BIN)/nats-server=/nats-server
IMAGE_FLAGS_nats := --cmd=-js --cmd=-sd --cmd=/data --port 4222
# The mock CLIs on PATH under every vendor's name, for a Station's agent container.
IMAGE_FILES_mockagent := --binary $(IMAGES_BIN)/mockagent=/usr/local/bin/mockagent \
  $(foreach v,claude codex gemini opencode,--symlink /usr/local/bin/$(v)=mockagent)

# IMAGES_DOCKER_LOAD=0 skips `docker load` (make demo does: localnode runs
# the tarballs themselves).
IMAGES_DOCKER_LOAD ?= 1

.PHONY: images
images: ## Build an image per service and tool into $(CACHE)/images (docs/images.md); docker load them.
	@mkdir -p $(IMAGES_BIN) $(dir $(IMAGEBUILD)) && : > $(IMAGES_DIR)/summary.txt
	@step() { local what=$$1 s e; shift; s=$$(date +%s%N); "$$@"; e=$$(date +%s%N); \
	  printf '  %-40s %5d.%01ds\n' "$$what" $$(( (e-s)/1000000000 )) $$(( (e-s)/100000000 % 10 )); }; \
	echo "images $(VERSION) at $(REVISION) ($(BUILD_DATE)), linux/$(IMAGE_ARCH), $(IMAGE_GOTOOLCHAIN)"; \
	step "go build $(words $(IMAGES)) static binaries" env CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) GOTOOLCHAIN=$(IMAGE_GOTOOLCHAIN) \
	  go build -trimpath -buildvcs=false -ldflags "$(LDFLAGS)" -o $(IMAGES_BIN)/ $(IMAGE_PKGS); \
	step "go build tools/imagebuild" env GOTOOLCHAIN=$(IMAGE_GOTOOLCHAIN) go build -trimpath -o $(IMAGEBUILD) ./tools/imagebuild; \
	$(foreach n,$(IMAGES),step "image $(n)" sh -c '$(IMAGEBUILD) --name $(IMAGE_REPO)/$(n):$(VERSION) \
	  $(or $(IMAGE_FILES_$(n)),--binary $(IMAGES_BIN)/$(n)=/$(n)) $(IMAGE_FLAGS_$(n)) \
	  --created $(BUILD_DATE) --version $(VERSION) --revision $(REVISION) --arch $(IMAGE_ARCH) \
	  --tarball $(IMAGES_DIR)/$(n)-$(VERSION).tar $(if $(IMAGES_OCI),--oci-layout $(IMAGES_OCI)/$(n)) \
	  >> $(IMAGES_DIR)/summary.txt';) \
	if [ "$(IMAGES_DOCKER_LOAD)" = 0 ]; then echo "  docker load skipped (IMAGES_DOCKER_LOAD=0)"; \
	elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then \
	  step "docker load $(words $(IMAGES)) images" sh -c 'for n in $(IMAGES); do docker load -q -i $(IMAGES_DIR)/$$n-$(VERSION).tar >/dev/null || exit 1; done'; \
	else echo "  docker does not answer: not loaded (docker load -i $(IMAGES_DIR)/<name>-$(VERSION).tar)"; fi; \
	echo; printf '%-40s %-71s  %-12s  %9s  %9s\n' IMAGE DIGEST ID SIZE UNPACKED; cat $(IMAGES_DIR)/summary.txt

$(GOLANGCI_LINT):
	@mkdir -p $(TOOLBIN)/tmp
	GOBIN=$(TOOLBIN)/tmp GOWORK=off go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(TOOLBIN)/tmp/golangci-lint $@

$(BUF):
	@mkdir -p $(TOOLBIN)/tmp
	GOBIN=$(TOOLBIN)/tmp GOWORK=off go install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
	mv $(TOOLBIN)/tmp/buf $@

$(PROTOC_GEN_GO):
	@mkdir -p $(TOOLBIN)/tmp $(TOOLBIN)/plugins
	GOBIN=$(TOOLBIN)/tmp GOWORK=off go install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	mv $(TOOLBIN)/tmp/protoc-gen-go $@ && ln -sf $@ $(TOOLBIN)/plugins/protoc-gen-go

$(PROTOC_GEN_GO_GRPC):
	@mkdir -p $(TOOLBIN)/tmp $(TOOLBIN)/plugins
	GOBIN=$(TOOLBIN)/tmp GOWORK=off go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	mv $(TOOLBIN)/tmp/protoc-gen-go-grpc $@ && ln -sf $@ $(TOOLBIN)/plugins/protoc-gen-go-grpc
