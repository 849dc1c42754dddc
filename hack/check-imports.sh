#!/usr/bin/env bash
# Fails when a package under renderer/ (the day-one side), its tests
# included, depends on anything under dayTwo/ or gitops/, directly or
# through another package: day-one is below both, so an import from it to
# them points upwards. Each offending import is printed as
# "IMPORTER imports IMPORTED", the importer being in the dependency set of
# the renderer package named first.
set -euo pipefail
cd "$(dirname "$0")/.."

module="$(go list -m)"
forbidden="^$module/(dayTwo|gitops)(/|$)"

status=0
for pkg in $(go list ./renderer/...); do
	# One line per package in pkg's dependency set (test files included):
	# its import path, then what it imports.
	bad="$(go list -deps -test -f '{{.ImportPath}}{{range .Imports}} {{.}}{{end}}' "$pkg" |
		awk -v re="$forbidden" '{ for (i = 2; i <= NF; i++) if ($i ~ re) print "  " $1 " imports " $i }' |
		sort -u)"
	if [[ -n $bad ]]; then
		echo "$pkg depends on dayTwo/ or gitops/:"
		echo "$bad"
		status=1
	fi
done
if [[ $status != 0 ]]; then
	echo "renderer/ must not import dayTwo/ or gitops/: move what both need to api/ or renderer/"
fi
exit $status
