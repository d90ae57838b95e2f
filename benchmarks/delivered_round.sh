#!/usr/bin/env bash
# One device call that re-measures what a user gets with the walls-before-profiler protocol (2026-12-06): each step
# under its own timeout, each packed into $OUT/<step>.tgz as soon as it ends (a call cut short keeps what ran).
#   DELIVERED_STEPS  default: residue r50 vgg16 calls call_overhead
#     residue        benchmarks/profiler_residue.py on the bf16 layers that were below 0.8× eager (walls before and
#                    after one profiler session, same process); the table is the card's (tests/data/replay_<card>_bf16)
#     r50            ResNet-50 b32 under bf16 autocast, tuned, cuDNN bf16 timed again in turn with it
#     vgg16          VGG-16 b1 strict fp32, tuned ($VGG_BUDGET_S, default 50 s), against cuDNN fp32 in turn
#     calls          the wide suite through the op in $CALLS_CLASSES (default bfloat16 tf32), tuned = the card's table
#     call_overhead  benchmarks/call_overhead.py (host / kernel µs per call; kernel pass after every wall)
#     fp32_models    ResNet-50 and MobileNetV2 b32 strict fp32, tuned ($FP32_BUDGET_S each, default 180 s, 12 trials
#                    a layer), against cuDNN fp32 in turn. Carry the tuner's first trials precompiled, or the budget
#                    goes to nvcc: precompile_cubins.py --machine <card> --warm-start 12 \
#                    --problems benchmarks/suites/models_b32_fp32_problems.txt (53 problems, ~360 sources, ~4 min)
# Kernels: precompile off the device (benchmarks/precompile_cubins.py --table tests/data/replay_<card>_*.json.gz
# --suite benchmarks/suites/wide.json --choice ...; tar cJf cubins.tar.xz .cubins) and carry .whl and cubins.tar.xz;
# start the command with the line ../shared/tools/device-wheels prints (wgmma_round.sh installs no wheels), e.g.
#   <wheels line> export CONVTUNE_CUBIN_DIR=/tmp/convtune-cubins; mkdir -p $CONVTUNE_CUBIN_DIR && tar xJf cubins.tar.xz \
#     --strip-components=1 -C $CONVTUNE_CUBIN_DIR; OUT=$OUT bash benchmarks/delivered_round.sh
set -uo pipefail
OUT=${OUT:-benchmarks/results/delivered_round}
WORK=${WORK:-/tmp/delivered_round}
mkdir -p "$OUT" "$WORK"
card=h200
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H100 && card=h100
echo "card: $card"
pack() { tar czf "$OUT/$1.tgz" -C "$WORK" "$1" 2>/dev/null; }
for step in ${DELIVERED_STEPS:-residue r50 vgg16 calls call_overhead}; do
    echo "== $step ($(date -u +%H:%M:%S))"
    case $step in
    residue)
        OUT=$WORK/residue RESIDUE_TABLE=tests/data/replay_${card}_bf16.json.gz timeout "${RESIDUE_S:-70}" \
            bash benchmarks/gpu_check.sh residue ;;
    r50)
        WORK=$WORK/r50/work OUT=$WORK/r50 WGMMA_STEPS=r50 timeout "${R50_S:-190}" bash benchmarks/wgmma_round.sh \
            2>&1 | tail -3
        grep -h "bf16 class" "$WORK"/r50/work/r50_bf16/models_resnet50.log ;;
    vgg16)
        OUT=$WORK/vgg16 MODELS=vgg16 MODEL_BUDGET_S=${VGG_BUDGET_S:-50} MODEL_BUDGET_TRIALS=6 \
            timeout "${VGG_S:-130}" bash benchmarks/gpu_check.sh models | grep "| vgg16" ;;
    calls)
        WORK=$WORK/calls/work OUT=$WORK/calls WGMMA_STEPS=calls CALLS_CLASSES="${CALLS_CLASSES:-bfloat16 tf32}" \
            CALLS_SUITES="${CALLS_SUITES:-wide}" CALLS_TABLE_BF16=tests/data/replay_${card}_bf16.json.gz \
            CALLS_TABLE_TF32=tests/data/replay_${card}_tf32.json.gz timeout "${CALLS_ROUND_S:-300}" \
            bash benchmarks/wgmma_round.sh ;;
    call_overhead)
        OUT=$WORK/call_overhead timeout "${CALL_OVERHEAD_S:-120}" bash benchmarks/gpu_check.sh call_overhead \
            | tail -50 ;;
    fp32_models)
        OUT=$WORK/fp32_models MODELS="resnet50 mobilenet_v2" MODEL_BUDGET_S=${FP32_BUDGET_S:-180} \
            MODEL_BUDGET_TRIALS=12 timeout "${FP32_MODELS_S:-480}" bash benchmarks/gpu_check.sh models \
            | grep -E "^\| (resnet50|mobilenet_v2) \|" ;;
    *) echo "unknown step $step"; exit 2 ;;
    esac
    pack "$step"
done
