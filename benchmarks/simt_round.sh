#!/usr/bin/env bash
# One device call for the CUDA-core implicit-GEMM family (igemm_simt): its GPU tests, then its configs (the model's
# top $SIMT_TOP plus bucket bests) against cuDNN fp32 on the wide suite, then the direct family's model choice on the
# dilated shapes (re-measured, verified against float64), each step under a timeout; everything under $WORK, packed
# into $OUT/simt_round.tar.gz (the device returns at most 8 files).
#   SIMT_STEPS  which steps (default: tests wide dilated); also
#     others   the other fp32 families (direct: model top $OTHERS_TOP + bucket bests; pointwise; unfused Winograd) on
#              the wide suite, for the same-protocol comparison with igemm_simt and the models' cross-family choice
#     models   benchmarks/model_inference.py via gpu_check.sh models ($MODELS, $MODEL_BUDGET_S, ...)
set -uo pipefail
OUT=${OUT:-benchmarks/results/igemm_simt_round}
WORK=${WORK:-/tmp/simt_round}
mkdir -p "$WORK" "$OUT"
for step in ${SIMT_STEPS:-tests wide dilated}; do
    case $step in
    tests)
        OUT=$WORK timeout 150 bash benchmarks/gpu_check.sh simt_tests ;;
    wide)
        OUT=$WORK/wide VS_CUDNN_ARGS="--suite benchmarks/suites/wide.json --families igemm_simt --top ${SIMT_TOP:-8} \
--buckets ${SIMT_BUCKETS:-6}" timeout "${SIMT_WIDE_S:-320}" bash benchmarks/gpu_check.sh vs_cudnn ;;
    dilated)
        OUT=$WORK/dilated VS_CUDNN_ARGS="--suite benchmarks/suites/wide.json --families direct --top 1 --buckets 0 \
--only deeplabv3_layer4_dil2_b8 deeplabv3_aspp_d6_b4" timeout 90 bash benchmarks/gpu_check.sh vs_cudnn ;;
    others)
        OUT=$WORK/others VS_CUDNN_ARGS="--suite benchmarks/suites/wide.json --families direct pointwise \
winograd_unfused --top ${OTHERS_TOP:-3} --buckets ${OTHERS_BUCKETS:-4}" timeout "${OTHERS_S:-200}" \
            bash benchmarks/gpu_check.sh vs_cudnn ;;
    models)
        OUT=$WORK timeout "${MODELS_S:-420}" bash benchmarks/gpu_check.sh models ;;
    *) echo "unknown step $step"; exit 2 ;;
    esac
done
tar -C "$WORK" -czf "$OUT/simt_round.tar.gz" .
