#!/usr/bin/env bash
# The TMA-fed 1×1 families on one card, both classes, in one device call (logs and tables under $OUT):
#   1. vs_cudnn.py on benchmarks/suites/conv1x1.json per class: the resident and TMA 1×1 families (bf16: the 16-bit
#      pair, TF32: the TF32 pair; $TOP configs each, default 16), cuDNN in the class in the same process;
#   2. a replay table per class: make_replay.py of the card's earlier reports of the class ($PRESET: h100 or h200, the
#      lists below) and the conv1x1 run of step 1 (its rows win the clashes);
#   3. user_suite.py per class and suite ($SUITES, default "public wide"): the op serving the table's fastest configs,
#      and untuned (the model's choice), against cuDNN in the class; kernel time by the CUDA profiler, eager and graph
#      walls.
#   PRESET=h200 bash benchmarks/tma_1x1_round.sh        (on the GPU host; the device tool's $OUT)
set -u
OUT=${OUT:-benchmarks/results/tma_1x1_round}
mkdir -p "$OUT"
. benchmarks/replay_reports.sh
case "${PRESET:-h100}" in
    h100) BF16_REPORTS=$H100_BF16_REPORTS TF32_REPORTS=$H100_TF32_REPORTS ;;
    h200) BF16_REPORTS=$H200_BF16_REPORTS TF32_REPORTS=$H200_TF32_REPORTS ;;
    *) echo "PRESET must be h100 or h200" >&2; exit 2 ;;
esac
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/nvidia_smi.txt" 2>&1
for cls in bfloat16 tf32; do
    if [ "$cls" = tf32 ]; then
        args=(--math tf32); families=(igemm_wgmma_1x1_resident igemm_wgmma_1x1_tma); reports=$TF32_REPORTS; tag=tf32
    else
        args=(--dtype bfloat16); families=(igemm_wgmma_half_1x1_resident igemm_wgmma_half_1x1_tma)
        reports=$BF16_REPORTS; tag=bf16
    fi
    echo "== $cls conv1x1 ($(date -u +%H:%M:%S))"
    timeout "${BENCH_S:-200}" python3 benchmarks/vs_cudnn.py "${args[@]}" --top "${TOP:-16}" --buckets 0 \
        --suite benchmarks/suites/conv1x1.json --out "$OUT/conv1x1_$tag" --families "${families[@]}" \
        > "$OUT/conv1x1_$tag.log" 2>&1
    grep -i "geometric" "$OUT/conv1x1_$tag.log"
    # shellcheck disable=SC2086  # the report lists split on whitespace
    python3 benchmarks/make_replay.py $reports "$OUT/conv1x1_$tag/vs_cudnn_$tag.json" \
        -o "$OUT/replay_${PRESET:-h100}_$tag.json.gz" 2>&1 | tail -1
    for suite in ${SUITES:-public wide}; do
        echo "== $cls $suite calls ($(date -u +%H:%M:%S))"
        timeout "${CALLS_S:-150}" python3 benchmarks/user_suite.py --class "$cls" --no-compile --untuned-too \
            --suite "benchmarks/suites/$suite.json" --configs-from "$OUT/replay_${PRESET:-h100}_$tag.json.gz" \
            --out "$OUT/calls_${tag}_$suite" > "$OUT/calls_${tag}_$suite.log" 2>&1
        echo "exit $?"; grep -A3 "geomean speedup" "$OUT/calls_${tag}_$suite/user_suite.md" | grep convtune
    done
done
# one archive: the device tool returns a bounded number of files
tar -C "$OUT" -czf "$OUT.tar.gz" . && mv "$OUT.tar.gz" "$OUT/round.tar.gz"
