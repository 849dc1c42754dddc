#!/usr/bin/env bash
# make run: runs the operator. With a kubeconfig (KUBECONFIG or
# ~/.kube/config) it installs the CRD into that cluster and runs the manager
# against it. Without one it starts the embedded process-backed cluster
# (bin/devcluster), runs the manager against it and applies
# examples/basic.yaml. Ctrl-C stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="$PWD/bin"

kubeconfig="${KUBECONFIG:-}"
if [[ -z "$kubeconfig" && -f "$HOME/.kube/config" ]]; then
	kubeconfig="$HOME/.kube/config"
fi

pids=()
cleanup() {
	trap - EXIT INT TERM
	for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

if [[ -z "$kubeconfig" ]]; then
	dir="$PWD/.cache/devcluster"
	rm -rf "$dir" && mkdir -p "$dir"
	echo "run: no kubeconfig found; starting the embedded cluster in $dir"
	hack/install-deps.sh
	"$BIN/devcluster" --dir "$dir" --bin "$BIN" --ready-file "$dir/ready" &
	pids+=($!)
	for _ in $(seq 120); do
		[[ -f "$dir/ready" ]] && break
		kill -0 "${pids[0]}" 2>/dev/null || { echo "run: devcluster exited; see $dir/logs"; exit 1; }
		sleep 0.5
	done
	[[ -f "$dir/ready" ]] || { echo "run: devcluster did not start in 60s; see $dir/logs"; exit 1; }
	kubeconfig="$dir/kubeconfig"
	apply_example=1
else
	echo "run: using $kubeconfig"
	"$BIN/kubectl" --kubeconfig "$kubeconfig" apply --server-side -f charts/cacheops/crds/
	apply_example=0
fi
export KUBECONFIG="$kubeconfig"

"$BIN/manager" --metrics-bind-address=127.0.0.1:8080 --health-probe-bind-address=127.0.0.1:8081 &
pids+=($!)

if [[ $apply_example == 1 ]]; then
	"$BIN/kubectl" apply -f examples/basic.yaml
	"$BIN/kubectl" wait --for=condition=Ready cachecluster/basic --timeout=180s || true
	master=""
	for _ in $(seq 60); do
		master="$("$BIN/kubectl" get cachecluster basic -o jsonpath='{.status.currentMaster}' 2>/dev/null || true)"
		[[ -n "$master" ]] && break
		sleep 0.5
	done
	ip="$("$BIN/kubectl" get pod "${master:-basic-0}" -o jsonpath='{.status.podIP}' 2>/dev/null || true)"
	cat <<MSG

run: the operator is running against the embedded cluster (pods are local
redis-server processes, each in its own network namespace).
  kubectl --kubeconfig $kubeconfig get cachecluster,statefulset,pods,pvc,svc
  kubectl --kubeconfig $kubeconfig describe cachecluster basic
  kubectl --kubeconfig $kubeconfig logs basic-0
  master: ${master:-<not elected yet>} (the pod labelled cache.cacheops.io/role=master; the Service "basic" selects it)
  REDISCLI_AUTH=\$(kubectl --kubeconfig $kubeconfig get secret basic-auth -o jsonpath='{.data.password}' | base64 -d) redis-cli -h ${ip:-<pod IP>} set hello world
  metrics: curl -s 127.0.0.1:8080/metrics | grep ^cacheops_
Ctrl-C stops the operator and the cluster.

MSG
fi
wait "${pids[-1]}"
