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
tools: ## Build etcd, kube-apiserver, controller-manager, scheduler, kubectl, helm, controller-gen, versitygw and Argo CD into bin/ (skipped when up to date).
	@hack/tools.sh

.PHONY: generate
generate: tools ## Regenerate deepcopy code and the CRD.
	$(BIN)/controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(BIN)/controller-gen crd:crdVersions=v1 paths=./api/... output:crd:artifacts:config=charts/cacheops/crds
	hack/crd-quantities.sh

.PHONY: manifests
manifests: generate ## Alias of generate (CRDs are part of it).

.PHONY: fmt
fmt: ## gofmt every Go file.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## go vet (including the end-to-end suite).
	go vet ./...
	go vet -tags e2e ./test/...

.PHONY: verify-files
verify-files: ## Fail when git tracks an executable that is not a script or a file over 1 MiB (allow-list: hack/tracked-files-allowed.txt).
	@hack/check-tracked-files.sh

.PHONY: verify-imports
verify-imports: ## Fail when a package under renderer/ (tests included) imports anything under dayTwo/ or gitops/.
	@hack/check-imports.sh

.PHONY: verify
verify: verify-files verify-imports generate ## Fail when generated files are stale, code is not gofmt-clean, go.mod is untidy, a tracked file is a build output or renderer/ imports dayTwo/ or gitops/.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	go mod tidy -diff
	@git diff --exit-code -- api charts || { echo "generated files are stale: run make generate and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api charts)" || { git status --porcelain -- api charts; echo "untracked generated files: run make generate and commit"; exit 1; }

.PHONY: unit
unit: ## Unit and integration tests (integration runs the module-built kube-apiserver and etcd).
	go test $(GO_TEST_FLAGS) ./...

# E2E_PARALLEL: how many e2e tests run at once, each in its own namespace,
# after the ones that restart the manager, the API server or a node, or
# change the CRD, have run alone (test/e2e/suite_test.go).
E2E_PARALLEL ?= 3

.PHONY: e2e
e2e: tools ## End-to-end tests: the real manager binary against the process-backed cluster (needs root and redis-server).
	@hack/install-deps.sh
	@go test -tags e2e -count=1 -timeout 50m -parallel $(E2E_PARALLEL) -v ./test/e2e/ > $(BIN)/e2e.log 2>&1 && rc=0 || rc=$$?; \
	grep -E '^(=== RUN|--- |    --- |PASS|FAIL|ok|e2e:)' $(BIN)/e2e.log || true; \
	if [ $$rc != 0 ]; then echo "e2e failed; the last 150 lines of $(BIN)/e2e.log:"; tail -n 150 $(BIN)/e2e.log; fi; exit $$rc

.PHONY: e2e-argocd
e2e-argocd: tools ## End-to-end tests with a real Argo CD (bin/argocd) syncing CacheClusters from a local git repository (needs root and redis-server).
	@hack/install-deps.sh
	@go test -tags e2e -count=1 -timeout 30m -v ./test/e2e/argocd/ > $(BIN)/e2e-argocd.log 2>&1 && rc=0 || rc=$$?; \
	grep -E '^(=== RUN|--- |    --- |PASS|FAIL|ok|e2e-argocd:)|measured:' $(BIN)/e2e-argocd.log || true; \
	if [ $$rc != 0 ]; then echo "e2e-argocd failed; the last 150 lines of $(BIN)/e2e-argocd.log:"; tail -n 150 $(BIN)/e2e-argocd.log; fi; exit $$rc

.PHONY: capture
capture: tools ## Run the end-to-end suite and write the live CacheClusters it sees into the Argo CD health check's testdata (captured-*.yaml).
	@hack/install-deps.sh
	CACHEOPS_CAPTURE_DIR=$(CURDIR)/gitops/argocd/cache.cacheops.io/CacheCluster/testdata go test -tags e2e -count=1 -timeout 30m ./test/e2e/

.PHONY: test
test: tools verify vet unit e2e e2e-argocd ## Everything CI checks.

.PHONY: bench
bench: tools ## Benchmarks as JSON in bench/: renderer.json, plan.json, devcluster.json, failover.json, upgrade.json, reshard.json, backup.json, sharded-backup.json, scale.json, scale-controlplane.json, claims.json (ratios against baselines measured in the same run; SCALE_CLUSTERS sets the fleet's size, default 300, SCALE_FAILOVERS its kills, default 20, SCALE_PROBE_TIMEOUT its probeTimeoutSeconds, default 5; SCALE_CP_CLUSTERS the control-plane-only count, default 1000; SCALE_CLAIMS the claims bound without pods, default 900; docs/scale.md).
	go run ./hack/benchjson -out bench/renderer.json -- ./renderer/...
	go run ./hack/benchjson -out bench/plan.json -- -bench BenchmarkPlan ./dayTwo/plan/
	go run ./hack/benchjson -out bench/devcluster.json -benchtime 3x -tags e2e -- -bench BenchmarkDevcluster ./test/benchmarks/
	go run ./hack/benchjson -out bench/failover.json -benchtime 10x -timeout 60m -tags e2e -- -bench BenchmarkFailover ./test/benchmarks/
	go run ./hack/benchjson -out bench/upgrade.json -benchtime 3x -tags e2e -- -bench BenchmarkUpgrade ./test/benchmarks/
	go run ./hack/benchjson -out bench/reshard.json -benchtime 1x -timeout 60m -tags e2e -- -bench BenchmarkReshard ./test/benchmarks/
	go run ./hack/benchjson -out bench/backup.json -benchtime 3x -timeout 40m -- -bench BenchmarkBackup ./dayTwo/backup/
	go run ./hack/benchjson -out bench/sharded-backup.json -benchtime 1x -timeout 60m -tags e2e -- -bench BenchmarkShardedBackup ./test/benchmarks/
	go run ./hack/benchjson -out bench/scale.json -benchtime 1x -timeout 90m -tags e2e -- -bench '^BenchmarkScale$$' ./test/benchmarks/
	go run ./hack/benchjson -out bench/scale-controlplane.json -benchtime 1x -timeout 60m -tags e2e -- -bench '^BenchmarkScaleControlPlane$$' ./test/benchmarks/
	go run ./hack/benchjson -out bench/claims.json -benchtime 1x -timeout 60m -tags e2e -- -bench '^BenchmarkClaimBinding$$' ./test/benchmarks/

.PHONY: build
build: ## Build the manager and the dev cluster.
	go build -o $(BIN)/manager ./cmd/manager
	go build -o $(BIN)/devcluster ./cmd/devcluster
	go build -o $(BIN)/kubectl-cache ./cmd/kubectl-cache

.PHONY: run
run: tools build ## Run the operator: against your kubeconfig's cluster, or an embedded one when there is none.
	@hack/run.sh
