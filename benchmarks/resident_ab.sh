#!/usr/bin/env bash
# A/B of the persistent 1x1 wgmma kernels: each patch of $RESIDENT_AB (class:patch pairs; default the two
# filter-streaming patches of session 14) on the conv1x1 suite, against cuDNN in its class in the same process, then
# the resident GPU cases (-k res_) with every patch applied. On the GPU host: `export OUT; bash benchmarks/resident_ab.sh`
# (carry .whl). Tables: $OUT/<class>/kernel_ab/conv1x1.md and the flat per-pass copies; tests: $OUT/gpu_tests.txt.
set -uo pipefail
OUT=${OUT:-benchmarks/results}
pairs=${RESIDENT_AB:-half:benchmarks/ab/resident_half_filters_streamed.patch tf32:benchmarks/ab/resident_tf32_filters_streamed.patch}
files=()
for pair in $pairs; do
    cls=${pair%%:*}
    case $cls in
    half) family=igemm_wgmma_half_1x1_resident; args="--dtype bfloat16"; files+=(tests/kernels/igemm_wgmma/test_igemm_wgmma_half_gpu.py) ;;
    tf32) family=igemm_wgmma_1x1_resident; args="--math tf32"; files+=(tests/kernels/igemm_wgmma/test_igemm_wgmma_gpu.py) ;;
    *) echo "resident_ab: unknown class $cls (half or tf32)"; exit 2 ;;
    esac
    OUT=$OUT/$cls AB_PATCH=${pair#*:} AB_SUITES=conv1x1 AB_FAMILIES=$family AB_TOP=${AB_TOP:-6} AB_ARGS="$args" \
        bash benchmarks/gpu_check.sh kernel_ab
    tail -3 "$OUT/$cls/kernel_ab/conv1x1.md"
done
for pair in $pairs; do patch -p1 --forward < "${pair#*:}" || exit 1; done
export PYTHONPATH=/tmp/site:$PWD CONVTUNE_CUBIN_DIR=${CONVTUNE_CUBIN_DIR:-/tmp/convtune-cubins}
python3 -m pytest -m gpu -q -p no:cacheprovider -W default -n "${GPU_TEST_WORKERS:-8}" -k res_ "${files[@]}" 2>&1 \
    | tee "$OUT/gpu_tests.txt" | tail -5
for pair in $pairs; do patch -p1 -R < "${pair#*:}" > /dev/null; done
