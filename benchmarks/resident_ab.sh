#!/usr/bin/env bash
# A/B of the two persistent 1x1 wgmma kernels with their filter rows streamed per chunk (the patches in
# benchmarks/ab/) on the conv1x1 suite, each against cuDNN in its class in the same process, then the GPU tests of both
# families with the patches applied (the resident cases, -k res_). Run on the GPU host: `export OUT; bash benchmarks/resident_ab.sh`
# (carry .whl). Tables: $OUT/{half,tf32}/kernel_ab/conv1x1.md; tests: $OUT/gpu_tests.txt.
set -uo pipefail
OUT=${OUT:-benchmarks/results}
top=${AB_TOP:-6}
OUT=$OUT/half AB_PATCH=benchmarks/ab/resident_half_filters_streamed.patch AB_SUITES=conv1x1 \
    AB_FAMILIES=igemm_wgmma_half_1x1_resident AB_TOP=$top AB_ARGS="--dtype bfloat16" bash benchmarks/gpu_check.sh kernel_ab
OUT=$OUT/tf32 AB_PATCH=benchmarks/ab/resident_tf32_filters_streamed.patch AB_SUITES=conv1x1 \
    AB_FAMILIES=igemm_wgmma_1x1_resident AB_TOP=$top AB_ARGS="--math tf32" bash benchmarks/gpu_check.sh kernel_ab
for side in half tf32; do tail -3 "$OUT/$side/kernel_ab/conv1x1.md"; done
patch -p1 --forward < benchmarks/ab/resident_half_filters_streamed.patch \
    && patch -p1 --forward < benchmarks/ab/resident_tf32_filters_streamed.patch || exit 1
export PYTHONPATH=/tmp/site:$PWD CONVTUNE_CUBIN_DIR=${CONVTUNE_CUBIN_DIR:-/tmp/convtune-cubins}
python3 -m pytest -m gpu -q -p no:cacheprovider -W default -n "${GPU_TEST_WORKERS:-8}" -k res_ \
    tests/kernels/igemm_wgmma/test_igemm_wgmma_half_gpu.py tests/kernels/igemm_wgmma/test_igemm_wgmma_gpu.py 2>&1 \
    | tee "$OUT/gpu_tests.txt" | tail -5
patch -p1 -R < benchmarks/ab/resident_tf32_filters_streamed.patch > /dev/null
patch -p1 -R < benchmarks/ab/resident_half_filters_streamed.patch > /dev/null
