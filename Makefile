# cacheops — run `make help` for the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

BIN := $(CURDIR)/bin
export KUBEBUILDER_ASSETS := $(BIN)
export HELM_BIN := $(BIN)/helm
GO_TEST_FLAGS ?=

.PHONY: help
help: ## Show the targets.
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

.PHONY: tools
tools: ## Build etcd, kube-apiserver, controller-manager, scheduler, kubectl, helm, controller-gen into bin/ (skipped when up to date).
	@hack/tools.sh

.PHONY: generate
generate: tools ## Regenerate deepcopy code and the CRD.
	$(BIN)/controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(BIN)/controller-gen crd:crdVersions=v1 paths=./api/... output:crd:artifacts:config=charts/cacheops/crds

.PHONY: manifests
manifests: generate ## Alias of generate (CRDs are part of it).

.PHONY: fmt
fmt: ## gofmt every Go file.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## go vet.
	go vet ./...

.PHONY: verify
verify: generate ## Fail when generated files are stale, code is not gofmt-clean or go.mod is untidy.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	go mod tidy -diff
	@git diff --exit-code -- api charts || { echo "generated files are stale: run make generate and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api charts)" || { git status --porcelain -- api charts; echo "untracked generated files: run make generate and commit"; exit 1; }

.PHONY: unit
unit: ## Unit and integration tests (integration runs the module-built kube-apiserver and etcd).
	go test $(GO_TEST_FLAGS) ./...

.PHONY: test
test: tools verify vet unit ## Everything CI checks.

.PHONY: bench
bench: tools ## Benchmarks, written as JSON to bench/results.json.
	go run ./hack/benchjson -out bench/results.json -- ./renderer/...

.PHONY: build
build: ## Build the manager and the dev cluster.
	go build -o $(BIN)/manager ./cmd/manager
	go build -o $(BIN)/devcluster ./cmd/devcluster

.PHONY: run
run: tools build ## Run the operator: against your kubeconfig's cluster, or an embedded one when there is none.
	@hack/run.sh
