#!/usr/bin/env bash
# The pointwise_sliced family's first GPU round (2026-12-06): its GPU tests, then kernel time against cuDNN on
# benchmarks/suites/small_gemm_1x1.json in each class next to the families that ran those shapes until now, then the
# same shapes called through convtune.ops.torch.conv2d (eager / graph / kernel against F.conv2d), the op served the
# fastest config this run measured. Each step under its own timeout, logs and tables under $OUT.
#   SLICED_STEPS  default: tests bf16 tf32 fp32 calls
#     tests   pytest -m gpu tests/kernels/pointwise_sliced (xdist workers)
#     bf16    vs_cudnn.py --dtype bfloat16 on the three detection heads: pointwise_sliced, igemm_half, igemm_wgmma_half
#     tf32    vs_cudnn.py --math tf32 on the three heads: pointwise_sliced, igemm, igemm_wgmma
#     fp32    vs_cudnn.py (strict fp32) on every entry: pointwise_sliced, pointwise, igemm_simt
#     calls   per class measured above: make_replay.py of its report, then user_suite.py --configs-from it
#     wide    the wide suite in bfloat16 through the op, served from the card's six-family bf16 reports
#             (benchmarks/results/igemm_wgmma_h200/six_families_<card>/half_{public,wide}) plus this run's bf16 report
#             merged by make_replay.py (the table replay_<card>_bf16 would be with this run's rows)
# Kernels: precompile off the device (precompile_cubins.py --suite benchmarks/suites/small_gemm_1x1.json --families
# ... --top $SLICED_TOP with CONVTUNE_EXPERIMENTAL=pointwise_sliced, and --cases of the GPU test module).
set -uo pipefail
OUT=${OUT:-benchmarks/results/sliced_round}
mkdir -p "$OUT"
export CONVTUNE_EXPERIMENTAL=pointwise_sliced
SUITE=benchmarks/suites/small_gemm_1x1.json
HEADS="yolov2_voc_head_b1 faster_rcnn_rpn_bbox_b1 openpose_stage1_paf_b4"
TOP=${SLICED_TOP:-48}
vs() {   # vs() NAME SECONDS ARGS...: one vs_cudnn.py run into $OUT/NAME under a timeout (its JSON is written per shape)
    local name=$1 limit=$2
    shift 2
    timeout "$limit" python3 benchmarks/vs_cudnn.py --suite "$SUITE" --top "$TOP" --buckets 0 \
        --out "$OUT/$name" "$@" 2>&1 | tee "$OUT/$name.log" | tail -20
}
for step in ${SLICED_STEPS:-tests bf16 tf32 fp32 calls}; do
    echo "== $step ($(date -u +%H:%M:%S))"
    case $step in
    tests)
        timeout "${SLICED_TESTS_S:-200}" python3 -m pytest -m gpu -q -p no:cacheprovider -W default -ra \
            -n "${GPU_TEST_WORKERS:-6}" tests/kernels/pointwise_sliced 2>&1 | tee "$OUT/gpu_tests.txt" | tail -8 ;;
    bf16) vs bf16 "${SLICED_BF16_S:-120}" --dtype bfloat16 --only $HEADS --families pointwise_sliced igemm_half igemm_wgmma_half ;;
    tf32) vs tf32 "${SLICED_TF32_S:-120}" --math tf32 --only $HEADS --families pointwise_sliced igemm igemm_wgmma ;;
    fp32) vs fp32 "${SLICED_FP32_S:-240}" --families pointwise_sliced pointwise igemm_simt ;;
    calls)
        for cls in ${SLICED_CALL_CLASSES:-bfloat16 tf32 ieee}; do
            case $cls in
            bfloat16) report=$OUT/bf16/vs_cudnn_bf16.json only=$HEADS ;;
            tf32) report=$OUT/tf32/vs_cudnn_tf32.json only=$HEADS ;;
            *) report=$OUT/fp32/vs_cudnn.json only="" ;;
            esac
            [ -f "$report" ] || { echo "no $report: $cls skipped"; continue; }
            python3 benchmarks/make_replay.py "$report" -o "$OUT/replay_$cls.json.gz" | tail -2
            timeout "${SLICED_CALLS_S:-150}" python3 benchmarks/user_suite.py --class "$cls" --suite "$SUITE" \
                ${only:+--only $only} --no-compile --calls 100 --configs-from "$OUT/replay_$cls.json.gz" \
                --out "$OUT/calls_$cls" 2>&1 | tee "$OUT/calls_$cls.log" | tail -22
        done ;;
    wide)
        card=h200
        nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H100 && card=h100
        six=benchmarks/results/igemm_wgmma_h200/six_families_$card
        python3 benchmarks/make_replay.py "$six"/half_public/vs_cudnn_bf16.json "$six"/half_wide/vs_cudnn_bf16.json \
            "$OUT/bf16/vs_cudnn_bf16.json" -o "$OUT/replay_${card}_bf16.json.gz" | tail -1
        timeout "${SLICED_WIDE_S:-240}" python3 benchmarks/user_suite.py --class bfloat16 \
            --suite benchmarks/suites/wide.json --no-compile --calls 100 --configs-from "$OUT/replay_${card}_bf16.json.gz" \
            --out "$OUT/wide_bf16" 2>&1 | tee "$OUT/wide_bf16.log" | tail -6 ;;
    *) echo "unknown step $step"; exit 2 ;;
    esac
done
