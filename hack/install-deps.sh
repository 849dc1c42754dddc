#!/usr/bin/env bash
# Installs, through Debian's apt, what the process-backed cluster needs and a
# fresh machine may lack: redis-server and redis-cli (redis:7.0.15 pods run
# them), valkey-server and valkey-cli 8.0.1 from Debian's bookworm-backports
# suite (valkey/valkey:8.0.1 pods run them), iproute2 (pod network
# namespaces), util-linux (nsenter), git (Argo CD's repo-server reads the e2e
# suite's local repository). The backports suite is added from the same
# archive as the machine's own Debian sources. Does nothing when all are
# present. Used by .ci/run, make e2e and make run.
set -euo pipefail
need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-cli >/dev/null || need+=(redis-tools)
command -v ip >/dev/null || need+=(iproute2)
command -v nsenter >/dev/null || need+=(util-linux)
command -v git >/dev/null || need+=(git)
backports=()
command -v valkey-server >/dev/null || backports+=(valkey-server)
command -v valkey-cli >/dev/null || backports+=(valkey-tools)

# add_backports writes a deb822 source for bookworm-backports that uses the
# URI and keyring of the existing Debian source (the one listing bookworm).
add_backports() {
	local list=/etc/apt/sources.list.d/bookworm-backports.sources
	if grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
		return
	fi
	local uri="" key=""
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[[ -f $f ]] || continue
		if grep -qE '^Suites:.*\bbookworm\b' "$f"; then
			uri=$(awk '/^URIs:/ {print $2; exit}' "$f")
			key=$(awk '/^Signed-By:/ {print $2; exit}' "$f")
			break
		fi
	done
	uri=${uri:-http://deb.debian.org/debian}
	key=${key:-/usr/share/keyrings/debian-archive-keyring.gpg}
	echo "install-deps: adding bookworm-backports from $uri"
	printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: %s\n' "$uri" "$key" >"$list"
}

if ((${#backports[@]})); then
	add_backports
fi
if ((${#need[@]} + ${#backports[@]})); then
	echo "install-deps: installing ${need[*]} ${backports[*]} with apt"
	apt-get update -qq
	if ((${#need[@]})); then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
	fi
	if ((${#backports[@]})); then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends -t bookworm-backports "${backports[@]}" >/dev/null
	fi
fi
