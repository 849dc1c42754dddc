#!/usr/bin/env bash
# Installs, through Debian's apt, what the process-backed cluster needs and a
# fresh machine may lack: redis-server and redis-cli (pods run them),
# iproute2 (pod network namespaces), util-linux (nsenter), git (Argo CD's
# repo-server reads the e2e suite's local repository). Does nothing when
# all are present. Used by .ci/run, make e2e and make run.
set -euo pipefail
need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-cli >/dev/null || need+=(redis-tools)
command -v ip >/dev/null || need+=(iproute2)
command -v nsenter >/dev/null || need+=(util-linux)
command -v git >/dev/null || need+=(git)
if ((${#need[@]})); then
	echo "install-deps: installing ${need[*]} with apt"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
