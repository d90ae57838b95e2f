#!/usr/bin/env bash
# One device call for the wgmma TF32 family (igemm_wgmma, sm_90a): its GPU tests, then its configs (the model's top
# $WGMMA_TOP plus bucket bests) against cuDNN TF32 on the wide and public suites, each step under a timeout;
# everything under $WORK, packed into $OUT/wgmma_round.tar.gz (the device returns at most 8 files).
#   WGMMA_STEPS  which steps (default: tests wide public)
set -uo pipefail
OUT=${OUT:-benchmarks/results/igemm_wgmma_round}
WORK=${WORK:-/tmp/wgmma_round}
mkdir -p "$WORK" "$OUT"
for step in ${WGMMA_STEPS:-tests wide public}; do
    case $step in
    tests)
        timeout "${WGMMA_TESTS_S:-200}" python3 -m pytest -m gpu -q -p no:cacheprovider -W default -ra \
            -n "${GPU_TEST_WORKERS:-6}" tests/kernels/igemm_wgmma 2>&1 | tee "$WORK/gpu_igemm_wgmma_tests.txt" | tail -15 ;;
    wide)
        OUT=$WORK/wide TF32_TOP=${WGMMA_TOP:-8} TF32_ARGS="--suite benchmarks/suites/wide.json --families igemm_wgmma \
--buckets ${WGMMA_BUCKETS:-6}" timeout "${WGMMA_WIDE_S:-300}" bash benchmarks/gpu_check.sh tf32 ;;
    public)
        OUT=$WORK/public TF32_TOP=${WGMMA_TOP:-8} TF32_ARGS="--families igemm_wgmma --buckets ${WGMMA_BUCKETS:-6}" \
            timeout "${WGMMA_PUBLIC_S:-150}" bash benchmarks/gpu_check.sh tf32 ;;
    *) echo "unknown step $step"; exit 2 ;;
    esac
done
tar -C "$WORK" -czf "$OUT/wgmma_round.tar.gz" .
