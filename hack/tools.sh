#!/usr/bin/env bash
# Builds the test control plane and code generators from pinned module
# sources into bin/. Each tool module under hack/tools is rebuilt only when
# its go.mod/go.sum or the Go version changed (a stamp file records both), so
# a second `make tools` takes a second. Nothing is downloaded except through
# the Go module proxy.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="$PWD/bin"
mkdir -p "$BIN"

# build MODULE_DIR BINARY:PACKAGE...
build() {
	local dir="$1"; shift
	local stamp="$BIN/.stamp-$(basename "$dir")"
	# A module that needs a newer Go than the machine's names it in TOOLCHAIN;
	# the module proxy serves that toolchain and go runs it.
	if [[ -n ${TOOLCHAIN[$dir]:-} ]]; then
		local -x GOTOOLCHAIN="${TOOLCHAIN[$dir]}"
	fi
	local want
	want="$(go version) $(cat "$dir/go.mod" "$dir/go.sum" | sha256sum | cut -d' ' -f1) ${LDFLAGS_EXTRA[$dir]:-}"
	local missing=0 spec
	for spec in "$@"; do
		[[ -x "$BIN/${spec%%:*}" ]] || missing=1
	done
	if [[ $missing == 0 && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
		return 0
	fi
	for spec in "$@"; do
		local name="${spec%%:*}" pkg="${spec#*:}"
		echo "tools: building $name from $pkg"
		local start=$SECONDS
		(cd "$dir" && go build -trimpath -ldflags="-s -w ${LDFLAGS_EXTRA[$dir]:-}" -o "$BIN/$name" "$pkg")
		echo "tools: $name built in $((SECONDS - start))s"
	done
	echo "$want" > "$stamp"
}

# Kubernetes reports the version it was stamped with; an unstamped build says
# v0.0.0-master, which discovery clients (Helm's .Capabilities) misread.
KUBE_VERSION=v1.37.2
CV=k8s.io/component-base/version
declare -A LDFLAGS_EXTRA=(
	[hack/tools/kube]="-X $CV.gitVersion=$KUBE_VERSION -X $CV.gitMajor=1 -X $CV.gitMinor=37 -X $CV.gitTreeState=clean"
	[hack/tools/argocd]="-X github.com/argoproj/argo-cd/v3/common.version=3.6.1"
)
# Argo CD v3.6.1 needs Go 1.27 (its go.mod says go 1.27.0).
declare -A TOOLCHAIN=(
	[hack/tools/argocd]=go1.27.3
)

build hack/tools/controller-gen controller-gen:sigs.k8s.io/controller-tools/cmd/controller-gen
build hack/tools/etcd etcd:go.etcd.io/etcd/server/v3
build hack/tools/helm helm:helm.sh/helm/v3/cmd/helm
build hack/tools/kube \
	kube-apiserver:k8s.io/kubernetes/cmd/kube-apiserver \
	kube-controller-manager:k8s.io/kubernetes/cmd/kube-controller-manager \
	kube-scheduler:k8s.io/kubernetes/cmd/kube-scheduler \
	kubectl:k8s.io/kubernetes/cmd/kubectl
build hack/tools/versitygw versitygw:github.com/versity/versitygw/cmd/versitygw
# About 10 minutes and 3 GB on 2 cores the first time; hold the shared lock
# (flock /tmp/cacheops-e2e.lock make tools) on a shared machine.
build hack/tools/argocd argocd:github.com/argoproj/argo-cd/v3/cmd
