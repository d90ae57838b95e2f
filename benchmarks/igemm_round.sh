#!/usr/bin/env bash
# One device call for an igemm kernel change, under $OUT: the tensor-core families' GPU tests (TF32 and 16-bit),
# then the benchmarks vs cuDNN in each class on the public suite, then on the wide suite (each step under a
# timeout; vs_cudnn writes its tables after every shape, so a cut step keeps what it measured).
#   TF32_TOP   configs per family timed by vs_cudnn (default 24)
#   VARIANTS=1 also the NHWC main-loop A/B (benchmarks/igemm_variants.py) over $IGEMM_TABLE
set -uo pipefail
OUT=${OUT:-benchmarks/results/igemm_round}
export TF32_TOP=${TF32_TOP:-24}
timeout 150 bash benchmarks/gpu_check.sh igemm_tests half_tests
if [ "${VARIANTS:-0}" = 1 ]; then
    PYTHONPATH=/tmp/site:$PWD CONVTUNE_CUBIN_DIR=${CONVTUNE_CUBIN_DIR:-/tmp/convtune-cubins} timeout 120 \
        python3 benchmarks/igemm_variants.py "${IGEMM_TABLE:?}" --top 3 --out "$OUT/variants" 2>&1 \
        | tee "$OUT/variants.log" | tail -3
fi
OUT=$OUT/public timeout 100 bash benchmarks/gpu_check.sh half
OUT=$OUT/public timeout 100 bash benchmarks/gpu_check.sh tf32
OUT=$OUT/wide TF32_ARGS="--suite benchmarks/suites/wide.json" timeout 170 bash benchmarks/gpu_check.sh tf32
OUT=$OUT/wide TF32_ARGS="--suite benchmarks/suites/wide.json" timeout 170 bash benchmarks/gpu_check.sh half
