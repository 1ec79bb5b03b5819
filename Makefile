# agent — build, test and run. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := build

# Recursively expanded: after `scripts/deps.sh` fetched a toolchain into
# .deps/go, later recipes find it.
GO        ?= $(shell scripts/deps.sh --which-go 2>/dev/null || echo go)
HOSTARCH  := $(patsubst x86_64,amd64,$(patsubst aarch64,arm64,$(shell uname -m)))
DEPS      := $(CURDIR)/.deps
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
TAGS      := sqlite_fts5,whisper
LDFLAGS   := -s -w -X agent/pkg/buildinfo.version=$(VERSION)
CONFIG    ?= config.toml

# cgo settings for the host build: whisper.cpp static libraries from .deps.
export CGO_ENABLED := 1
export CGO_CFLAGS  := -O2 -I$(DEPS)/whisper/linux-$(HOSTARCH)/include
export CGO_LDFLAGS := -L$(DEPS)/whisper/linux-$(HOSTARCH)/lib
export AGENT_ORT_LIB := $(DEPS)/onnxruntime/linux-$(HOSTARCH)/libonnxruntime.so.1

NATIVE_STAMPS := $(DEPS)/onnxruntime/linux-$(HOSTARCH)/libonnxruntime.so.1 $(DEPS)/whisper/linux-$(HOSTARCH)/lib/libwhisper.a $(DEPS)/models/silero_vad_v5.onnx

.PHONY: help build build-arm64 build-cuda run test test-short test-systemd soak lint bench deb deps models testmodels install clean

help: ## list targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(NATIVE_STAMPS):
	scripts/deps.sh apt ort whisper vad go

deps: ## install every native dependency (apt, ONNX Runtime, whisper.cpp host+arm64, Go modules, test tools)
	scripts/deps.sh

build: $(NATIVE_STAMPS) ## build bin/agent and bin/agentctl (+ bin/lib/libonnxruntime.so.1)
	$(GO) build -trimpath -tags $(TAGS) -ldflags '$(LDFLAGS)' -o bin/ ./cmd/agent ./cmd/agentctl
	@mkdir -p bin/lib && cp -f $(DEPS)/onnxruntime/linux-$(HOSTARCH)/libonnxruntime.so.1 bin/lib/
	@# The Silero VAD model is real (pinned, 2 MB): models/ gets it for make run and install.
	@[ -f models/silero_vad_v5.onnx ] || cp $(DEPS)/models/silero_vad_v5.onnx models/

build-arm64: ## cross-build bin/linux-arm64/ with cgo and check it starts under qemu
	scripts/deps.sh apt ort vad whisper-arm64 go
	scripts/cross-arm64.sh "$(LDFLAGS)" "$(TAGS)"

build-cuda: $(NATIVE_STAMPS) ## on a Jetson (CUDA toolkit installed): bin/ with whisper.cpp on the GPU (asr.gpu = true)
	scripts/deps.sh whisper-cuda
	CGO_CFLAGS="-O2 -I$(DEPS)/whisper/linux-$(HOSTARCH)-cuda/include" \
	CGO_LDFLAGS="-L$(DEPS)/whisper/linux-$(HOSTARCH)-cuda/lib -L$${CUDA_HOME:-/usr/local/cuda}/lib64" \
	  $(GO) build -trimpath -tags $(TAGS),cuda -ldflags '$(LDFLAGS)' -o bin/ ./cmd/agent ./cmd/agentctl
	@mkdir -p bin/lib && cp -f $(DEPS)/onnxruntime/linux-$(HOSTARCH)/libonnxruntime.so.1 bin/lib/

run: build ## build and start the daemon on ./config.toml (Ctrl-C stops it)
	bin/agent -config $(CONFIG)

testmodels: ## generate random-weight test models into testdata/models (tests only)
	$(GO) run ./scripts/testmodels testdata/models

test: $(NATIVE_STAMPS) ## everything CI runs: vet, race tests with native libraries, integration tests
	scripts/deps.sh node mcp nats
	$(MAKE) --no-print-directory testmodels
	$(GO) vet -tags $(TAGS) ./...
	AGENT_REQUIRE_NATIVE=1 $(GO) test -race -count=1 -tags $(TAGS) -timeout 20m ./...
	# The fleet once more against Debian's nats-server (2.9), not only the embedded one.
	NATSTEST_SERVER=$(CURDIR)/.deps/nats-server/usr/sbin/nats-server $(GO) test -race -count=1 -short ./pkg/fleet

test-short: ## fast loop: tests without -race
	$(GO) test -count=1 -tags $(TAGS) ./...

lint: ## vet, gofmt and staticcheck
	$(GO) vet -tags $(TAGS) ./...
	@out=$$("$$(dirname $(GO))/gofmt" -l $$(git ls-files '*.go')) || exit 1; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 -tags $(TAGS) ./...

bench: build build-arm64 testmodels ## run benchmarks and write bench/RESULTS.md
	scripts/bench.sh

deb: build build-arm64 ## build dist/agent_VERSION_amd64.deb and _arm64.deb (dpkg-deb, no network)
	scripts/deb.sh amd64 bin
	scripts/deb.sh arm64 bin/linux-arm64

test-systemd: build ## install the amd64 .deb in a systemd-nspawn container and check the service under a real systemd
	scripts/deb.sh amd64 bin >/dev/null
	scripts/test-systemd.sh

SOAK_MINUTES ?= 30
soak: build testmodels ## test-systemd plus SOAK_MINUTES (30) of mixed load on the service; writes bench/soak.md (not run by CI)
	scripts/deb.sh amd64 bin >/dev/null
	scripts/test-systemd.sh --soak $(SOAK_MINUTES)

models: ## fetch the real model weights (needs internet; pinned SHA-256)
	scripts/fetch-models.sh

install: build ## install on this machine (systemd unit, /usr/local/bin, /etc/agent)
	scripts/install.sh bin

clean:
	rm -rf bin dist
