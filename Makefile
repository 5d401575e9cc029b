# Makefile for sluice. `make proto` regenerates the gRPC code from
# proto/sluice/v1/*.proto; `make test` runs every test with the race detector.

GO      ?= go
PROTOC  ?= protoc
BIN     := $(CURDIR)/.bin

# Code generator versions; bump them here and run `make proto`.
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2

PROTO_DIR   := proto
PROTO_FILES := $(wildcard $(PROTO_DIR)/sluice/v1/*.proto)

# VERSION is stamped into `sluice version` by `make build`.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)

.PHONY: all build test vet fmt proto proto-tools clean

all: vet test build

## build: compile the sluice binary into .bin/sluice
build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN)/sluice ./cmd/sluice

## test: run every test with the race detector
test:
	$(GO) test -race ./...

## vet: run go vet on every package
vet:
	$(GO) vet ./...

## fmt: list files gofmt would change (fails if any)
fmt:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "$$out"; exit 1; fi

## proto-tools: install the pinned protoc plugins into .bin/
proto-tools: $(BIN)/protoc-gen-go-$(PROTOC_GEN_GO_VERSION) $(BIN)/protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION)

$(BIN)/protoc-gen-go-$(PROTOC_GEN_GO_VERSION):
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	@touch $@

$(BIN)/protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION):
	GOBIN=$(BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	@touch $@

## proto: regenerate the Go code in proto/sluice/v1 (needs protoc on PATH)
proto: proto-tools
	$(PROTOC) -I $(PROTO_DIR) \
		--plugin=protoc-gen-go=$(BIN)/protoc-gen-go \
		--plugin=protoc-gen-go-grpc=$(BIN)/protoc-gen-go-grpc \
		--go_out=$(PROTO_DIR) --go_opt=paths=source_relative \
		--go-grpc_out=$(PROTO_DIR) --go-grpc_opt=paths=source_relative \
		$(PROTO_FILES)

## clean: remove built binaries and installed tools
clean:
	rm -rf $(BIN)
