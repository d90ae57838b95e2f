#!/usr/bin/env bash
# One device call for an igemm kernel change: the family's GPU tests, the main-loop A/B (benchmarks/igemm_variants.py
# over the last committed public table), and the TF32 benchmark on the public and the wide suites, under $OUT.
#   IGEMM_TABLE   the vs_cudnn_tf32.json whose configs the A/B times (default: v4_pipelined public)
#   TF32_TOP      configs per family timed by vs_cudnn (default 24)
set -uo pipefail
OUT=${OUT:-benchmarks/results/igemm_round}
TABLE=${IGEMM_TABLE:-benchmarks/results/igemm_h200/v4_pipelined/public/tf32/vs_cudnn_tf32.json}
export TF32_TOP=${TF32_TOP:-24}
timeout 200 bash benchmarks/gpu_check.sh igemm_tests
export PYTHONPATH=/tmp/site:$PWD CONVTUNE_CUBIN_DIR=${CONVTUNE_CUBIN_DIR:-/tmp/convtune-cubins}
timeout 120 python3 benchmarks/igemm_variants.py "$TABLE" --top 3 --out "$OUT/variants" 2>&1 | tee "$OUT/variants.log" | tail -3
OUT=$OUT/public timeout 150 bash benchmarks/gpu_check.sh tf32
OUT=$OUT/wide TF32_ARGS="--suite benchmarks/suites/wide.json" timeout 300 bash benchmarks/gpu_check.sh tf32
