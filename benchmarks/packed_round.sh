#!/usr/bin/env bash
# One device call running gpu_check.sh steps, each under its own timeout, everything written under $WORK and packed
# into $OUT/round.tar.gz (the device returns at most 8 files; a step killed by its timeout leaves what it wrote).
#   bash benchmarks/packed_round.sh STEP[:SECONDS]...      e.g. eager_profile:90 user_suite:260 models:200
# Environment: whatever the steps read (gpu_check.sh's header lists it).
set -uo pipefail
OUT=${OUT:-benchmarks/results/round}
WORK=${WORK:-/tmp/packed_round}
mkdir -p "$WORK" "$OUT"
for spec in "$@"; do
    step=${spec%%:*}
    limit=${spec#*:}
    [ "$limit" = "$spec" ] && limit=300
    OUT=$WORK timeout "$limit" bash benchmarks/gpu_check.sh "$step" || echo "== $step ended with status $?"
done
tar -C "$WORK" -czf "$OUT/round.tar.gz" .
