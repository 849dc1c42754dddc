#!/usr/bin/env bash
# Fails when the index holds a file that should not be in git: an executable
# that is not a script (a build output such as a committed `manager`), or any
# file larger than 1 MiB. A tracked file may be executable only when it starts
# with `#!`. Real fixtures that break a rule are listed, one path a line, in
# hack/tracked-files-allowed.txt (`#` starts a comment); an entry there should
# say in its comment why the file belongs in git.
#
# It reads the index (what the next commit holds), not the work tree, so a
# file that is ignored or not yet added is not judged.
set -euo pipefail
cd "$(dirname "$0")/.."

max_bytes=$((1024 * 1024))
allow_file=hack/tracked-files-allowed.txt

declare -A allowed=()
if [[ -f $allow_file ]]; then
	while IFS= read -r line; do
		line="${line%%#*}"
		line="${line%"${line##*[![:space:]]}"}"
		[[ -n $line ]] && allowed["$line"]=1
	done < "$allow_file"
fi

bad=()
# git ls-files -s prints "<mode> <blob> <stage>\t<path>"; cat-file turns
# "<blob> <mode>\t<path>" into "<blob> <size> <mode>\t<path>".
while IFS=$'\t' read -r meta path; do
	read -r blob size mode <<< "$meta"
	[[ -n ${allowed["$path"]:-} ]] && continue
	[[ $mode == 120000 || $mode == 160000 ]] && continue # symlink, submodule
	if (( size > max_bytes )); then
		bad+=("$path: $size bytes, more than 1 MiB")
	fi
	if [[ $mode == 100755 && "$(git cat-file blob "$blob" | head -c 2)" != '#!' ]]; then
		bad+=("$path: executable but not a script (it does not start with #!)")
	fi
done < <(git -c core.quotePath=false ls-files -s |
	awk -F'\t' '{split($1, m, " "); print m[2] " " m[1] "\t" $2}' |
	git cat-file --batch-check=$'%(objectname) %(objectsize) %(rest)')

if (( ${#bad[@]} )); then
	echo "tracked files that do not belong in git (remove them with git rm --cached and ignore them, or list a real fixture in $allow_file):"
	printf '  %s\n' "${bad[@]}"
	exit 1
fi
