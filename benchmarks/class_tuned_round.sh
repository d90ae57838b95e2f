#!/usr/bin/env bash
# Issue 18's acceptance run for one precision class in one device call: the public and the wide conv2d suites, each
# tuned by the tuner into an empty database (every family of the class, the TMA 1×1 ones included; $TUNE_S seconds
# for the whole suite, $TRIALS trials a shape at most), then measured through convtune.ops.torch.conv2d tuned (the
# database's best) and untuned (the model's choice) against cuDNN in the class: kernel time by the CUDA profiler,
# eager and graph walls. Logs, tables and the databases under $OUT, one archive (round.tar.gz) for the device tool.
#   CLASS=tf32 bash benchmarks/class_tuned_round.sh        CLASS=bfloat16 ...
set -u
OUT=${OUT:-benchmarks/results/class_tuned_round}
CLASS=${CLASS:-tf32}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/nvidia_smi.txt" 2>&1
for suite in ${SUITES:-public wide}; do
    if [ "$suite" = public ]; then tune_s=${PUBLIC_TUNE_S:-60}; limit=${PUBLIC_LIMIT_S:-150}
    else tune_s=${TUNE_S:-240}; limit=${WIDE_LIMIT_S:-380}; fi
    echo "== $CLASS $suite: tune $tune_s s, then calls ($(date -u +%H:%M:%S))"
    timeout "$limit" python3 benchmarks/user_suite.py --class "$CLASS" --no-compile --untuned-too \
        --suite "benchmarks/suites/$suite.json" --tune-budget-s "$tune_s" --tune-budget-trials "${TRIALS:-16}" \
        --db "sqlite:///$OUT/${CLASS}_$suite.db" --calls "${CALLS:-60}" --out "$OUT/${CLASS}_$suite" \
        > "$OUT/${CLASS}_$suite.log" 2>&1
    echo "exit $?"; grep -A4 "geomean speedup" "$OUT/${CLASS}_$suite/user_suite.md" | grep convtune
done
tar -C "$OUT" -czf "/tmp/round.tar.gz" . && mv /tmp/round.tar.gz "$OUT/round.tar.gz"
