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
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X github.com/vigilhq/vigil/host/internal/command.Version=$(VERSION)
export VIGIL_CONSUL_BIN := $(TOOLBIN)/consul

.PHONY: build test unit e2e lint demo proto proto-check tools consul proto-tools clean bench bench-quick

build: ## bin/vigil, the mock engines, and bin/vigil-adapter-vllm (the vLLM adapter as a separate plugin)
	go build -ldflags '$(LDFLAGS)' -o $(BIN)/vigil ./host/cmd/vigil
	go build -o $(BIN)/vllm-mock ./plugins/vllm/cmd/vllm-mock
	go build -o $(BIN)/sglang-mock ./plugins/sglang/cmd/sglang-mock
	go build -o $(BIN)/trtllm-mock ./plugins/trtllm/cmd/trtllm-mock
	go build -o $(BIN)/vigil-adapter-vllm ./plugins/vllm/cmd/vigil-adapter-vllm

test: lint unit e2e ## everything CI runs

lint: ## gofmt and go vet over every module
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet $(PKGS) ./e2e/...

unit: ## unit and in-process tests, race detector on
	go test -race -count=1 $(PKGS)

# The e2e tests start real processes and a Consul agent; one package at a
# time keeps them steady on a 2-core machine.
e2e: consul ## process tests against a real Consul agent
	go test -race -count=1 -p 1 -timeout 20m ./e2e/...

# The benchmarks build their own vigil and each engine's mock (no -race)
# and start their own Consul agent; see bench/README.md. The full run, with
# every engine, takes about 8 minutes and writes bench/results.md and
# bench/results.json; bench-quick runs every engine too.
bench: consul ## measure vigil: print the figures and write bench/results.{md,json}
	go run ./bench/cmd/vigil-bench

bench-quick: consul ## one short trial of each figure, to keep the harness working (CI)
	go run ./bench/cmd/vigil-bench -quick -out $(CURDIR)/bench/tmp

demo: build ## a vllm-mock and vigil on the file registry: register, lose, exit 1
	./scripts/demo.sh

tools: consul proto-tools

consul: $(TOOLBIN)/consul
$(TOOLBIN)/consul: tools/consul/go.mod tools/consul/go.sum
	cd tools/consul && GOWORK=off go build -o $(TOOLBIN)/consul github.com/hashicorp/consul

proto-tools: $(TOOLBIN)/buf $(TOOLBIN)/protoc-gen-go $(TOOLBIN)/protoc-gen-go-grpc
$(TOOLBIN)/buf $(TOOLBIN)/protoc-gen-go $(TOOLBIN)/protoc-gen-go-grpc &: tools/proto/go.mod tools/proto/go.sum
	cd tools/proto && GOWORK=off go build -o $(TOOLBIN)/ github.com/bufbuild/buf/cmd/buf \
		google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc

proto: proto-tools ## regenerate the committed Go code from the .proto files
	$(TOOLBIN)/buf lint
	$(TOOLBIN)/buf generate

proto-check: proto ## fail when the committed generated code is stale
	@git diff --exit-code -- '*.pb.go' || { echo "generated code is stale: run make proto and commit"; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard -- '*.pb.go'); \
	  if [ -n "$$untracked" ]; then echo "uncommitted generated files: $$untracked"; exit 1; fi

clean:
	rm -rf $(BIN)
