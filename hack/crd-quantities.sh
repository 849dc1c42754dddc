#!/usr/bin/env bash
# Tightens the pattern of every resource quantity in the CacheCluster CRD.
# controller-gen emits Kubernetes' own quantity pattern, which admits
# exponents: 1e.5 does not decode, 1e-2147483647 makes the decoder compute
# for minutes, and 1e9999999999 decodes but no API server can apply it, so
# one team's manifest could stall the operator for every team. cacheops
# accepts plain numbers with an optional suffix (500m, 1Gi, 2G, 0.5), which
# is also what Quantity writes back, so status values match it too. There
# is no marker for a field of a Kubernetes type, hence this step of
# `make generate`.
set -euo pipefail
crd="${1:-charts/cacheops/crds/cache.cacheops.io_cacheclusters.yaml}"
k8s='pattern: ^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$'
ours='pattern: ^[0-9]{1,18}([.][0-9]{1,9})?([KMGTPE]i|[numkMGTPE])?$'
grep -qF -- "$k8s" "$crd" || { echo "crd-quantities: the quantity pattern is not in $crd; controller-gen changed, update $0" >&2; exit 1; }
A="$k8s" B="$ours" perl -pi -e 's/\Q$ENV{A}\E/$ENV{B}/g' "$crd"
