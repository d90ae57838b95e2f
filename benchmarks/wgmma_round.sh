#!/usr/bin/env bash
# One device call for the wgmma families (igemm_wgmma TF32, igemm_wgmma_half bf16/fp16; sm_90a): their GPU tests,
# then their configs (the model's top $WGMMA_TOP) against cuDNN in the class on the wide and public suites, each step
# under a timeout; everything under $WORK, packed into $OUT/wgmma_round.tar.gz (the device returns at most 8 files).
#   WGMMA_STEPS  which steps (default: tests wide public): tests (every wgmma family's GPU tests), half_tests (the
#                igemm_half family's GPU tests), wino_tc (the experimental TF32 Winograd family's GPU tests and
#                public-suite timing), nvrtc (the operator
#                tests with nvcc off the PATH: kernels built by NVRTC for sm_90a), wide / public (TF32; the families
#                in $WGMMA_TF32_FAMILIES, default igemm_wgmma),
#                half_wide / half_public (bfloat16, $HALF_DTYPE to change; the families in $WGMMA_HALF_FAMILIES,
#                default the two 16-bit wgmma ones), torch_ops (the dense torch op's GPU tests: every family, graphs,
#                compile, 16-bit and autocast), r50 (ResNet-50 b32 converted and tuned against cuDNN in the class:
#                $R50_MATH bf16 (autocast, default) or tf32; $R50_TRIALS a conv), calls (the public and wide suites
#                called through convtune.ops.torch.conv2d against F.conv2d in each class of $CALLS_CLASSES, default
#                tf32 bfloat16; suites $CALLS_SUITES: tuned = the replay table's fastest configs ($CALLS_TABLE_TF32,
#                $CALLS_TABLE_BF16; default the H200 tables in tests/data), untuned = the model's
#                choice; eager,
#                CUDA graph and kernel µs per call)
set -uo pipefail
OUT=${OUT:-benchmarks/results/igemm_wgmma_round}
WORK=${WORK:-/tmp/wgmma_round}
mkdir -p "$WORK" "$OUT"
half_families=${WGMMA_HALF_FAMILIES:-igemm_wgmma_half igemm_wgmma_half_1x1}
tf32_families=${WGMMA_TF32_FAMILIES:-igemm_wgmma}
for step in ${WGMMA_STEPS:-tests wide public}; do
    case $step in
    tests)
        timeout "${WGMMA_TESTS_S:-200}" python3 -m pytest -m gpu -q -p no:cacheprovider -W default -ra \
            -n "${GPU_TEST_WORKERS:-6}" tests/kernels/igemm_wgmma 2>&1 | tee "$WORK/gpu_igemm_wgmma_tests.txt" | tail -15 ;;
    half_tests)   # the 16-bit mma.sync family's GPU tests (igemm_half: any C through the padded workspace; its 1x1)
        timeout "${HALF_TESTS_S:-240}" python3 -m pytest -m gpu -q -p no:cacheprovider -W default -ra \
            -n "${GPU_TEST_WORKERS:-6}" tests/kernels/igemm/test_igemm_half_gpu.py 2>&1 \
            | tee "$WORK/gpu_igemm_half_tests.txt" | tail -15 ;;
    wino_tc|wino_tc_tests)   # the experimental TF32 Winograd family: its GPU tests, then (wino_tc) the public suite
        CONVTUNE_EXPERIMENTAL=winograd_unfused_tf32 timeout "${WINO_TC_TESTS_S:-240}" python3 -m pytest -m gpu -q \
            -p no:cacheprovider -W default -ra -n "${GPU_TEST_WORKERS:-6}" \
            tests/kernels/winograd/test_winograd_unfused_tf32_gpu.py 2>&1 | tee "$WORK/gpu_winograd_tf32_tests.txt" \
            | tail -15
        [ "$step" = wino_tc ] || continue
        CONVTUNE_EXPERIMENTAL=winograd_unfused_tf32 OUT=$WORK/wino_tc_public TF32_TOP=${WGMMA_TOP:-8} \
            TF32_ARGS="--families winograd_unfused_tf32 igemm_wgmma igemm_wgmma_1x1" \
            timeout "${WGMMA_PUBLIC_S:-150}" bash benchmarks/gpu_check.sh tf32 ;;
    nvrtc)
        py=$(command -v python3)   # the host's Python, found before nvcc leaves the PATH
        PATH=/usr/bin:/bin timeout "${WGMMA_NVRTC_S:-120}" "$py" -m pytest -m gpu -q -p no:cacheprovider -W default \
            -ra tests/kernels/igemm_wgmma -k operator_api 2>&1 | tee "$WORK/gpu_nvrtc_tests.txt" | tail -8 ;;
    half_wide)
        OUT=$WORK/half_wide TF32_TOP=${WGMMA_TOP:-8} TF32_ARGS="--suite benchmarks/suites/wide.json --families \
$half_families" timeout "${WGMMA_WIDE_S:-300}" bash benchmarks/gpu_check.sh half ;;
    half_public)
        OUT=$WORK/half_public TF32_TOP=${WGMMA_TOP:-8} TF32_ARGS="--families $half_families" \
            timeout "${WGMMA_PUBLIC_S:-150}" bash benchmarks/gpu_check.sh half ;;
    ncu)   # Nsight Compute on one shape and config per line of $WGMMA_NCU ("problem|config"), the GEMM kernel only
        # (the profiled script imports convtune: the checkout and gpu_check.sh's wheels on the path)
        export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
        [ -d /tmp/site ] && export PYTHONPATH=/tmp/site:$PYTHONPATH
        while IFS='|' read -r problem config; do
            [ -n "$problem" ] || continue
            echo "== $problem | $config"
            timeout 120 ncu --clock-control none --kernel-name regex:'igemm_wgmma(_half)?(_1x1)?(_resident)?_fwd' --launch-skip 3 \
                --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
                --section Occupancy --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
                python3 benchmarks/igemm_profile.py --problem "$problem" --config "$config"
        done <<< "${WGMMA_NCU:-}" 2>&1 | tee "$WORK/ncu.txt" | grep -E "^==|Duration|Throughput|Stall|Issue|Eligible|Occupancy|Active Warps|Registers" | head -120 ;;
    wide)
        OUT=$WORK/wide TF32_TOP=${WGMMA_TOP:-8} TF32_ARGS="--suite benchmarks/suites/wide.json --families $tf32_families \
--buckets ${WGMMA_BUCKETS:-6}" timeout "${WGMMA_WIDE_S:-300}" bash benchmarks/gpu_check.sh tf32 ;;
    public)
        OUT=$WORK/public TF32_TOP=${WGMMA_TOP:-8} TF32_ARGS="--families $tf32_families --buckets ${WGMMA_BUCKETS:-6}" \
            timeout "${WGMMA_PUBLIC_S:-150}" bash benchmarks/gpu_check.sh tf32 ;;
    torch_ops)
        timeout "${WGMMA_TORCH_S:-120}" python3 -m pytest -m gpu -q -p no:cacheprovider -W default -ra \
            tests/ops/torch/test_torch_dense_gpu.py 2>&1 | tee "$WORK/gpu_torch_ops_tests.txt" \
            | tail -8 ;;
    r50)
        OUT=$WORK/r50_${R50_MATH:-bf16} MODELS=resnet50 MODEL_MATH=${R50_MATH:-bf16} MODEL_BUDGET_S=${R50_BUDGET_S:-200} \
            MODEL_BUDGET_TRIALS=${R50_TRIALS:-20} timeout "${WGMMA_R50_S:-200}" bash benchmarks/gpu_check.sh models ;;
    calls)   # one process per class and suite: cuDNN once, the op tuned (the replay table's configs) and untuned
        for cls in ${CALLS_CLASSES:-tf32 bfloat16}; do
            [ "$cls" = tf32 ] && table=${CALLS_TABLE_TF32:-tests/data/replay_h200_tf32.json.gz} \
                || table=${CALLS_TABLE_BF16:-tests/data/replay_h200_bf16.json.gz}
            for suite in ${CALLS_SUITES:-public wide}; do
                [ "$suite" = public ] && limit=${CALLS_PUBLIC_S:-120} || limit=${CALLS_S:-190}
                PYTHONFAULTHANDLER=1 timeout "$limit" python3 benchmarks/user_suite.py --class "$cls" \
                    --no-compile --untuned-too --suite "benchmarks/suites/$suite.json" --configs-from "$table" \
                    --out "$WORK/calls_${cls}_$suite" > "$WORK/calls_${cls}_$suite.log" 2>&1
                echo "calls $cls $suite: exit $?"; tail -4 "$WORK/calls_${cls}_$suite.log"
            done
        done ;;
    *) echo "unknown step $step"; exit 2 ;;
    esac
done
tar -C "$WORK" -czf "$OUT/wgmma_round.tar.gz" .
