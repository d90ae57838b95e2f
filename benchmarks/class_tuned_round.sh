#!/usr/bin/env bash
# Issue 18's acceptance run for one precision class (bf16: one device call; TF32: one per suite): the public and
# wide conv2d suites, each tuned by the tuner into an empty database (every family of the class, the TMA 1×1 ones
# included; $TUNE_S seconds for the whole suite, $TRIALS trials a shape at most), then measured through
# convtune.ops.torch.conv2d tuned (the database's best) and untuned (the model's choice) against cuDNN in the class:
# kernel time by the CUDA profiler, eager and graph walls. Logs, tables and the databases under $OUT; one archive
# without the databases (round.tar.gz, which the device tool returns where it refuses many files).
#   CLASS=bfloat16 bash benchmarks/class_tuned_round.sh    (both suites in one call: ~190 s on an H100)
#   CLASS=tf32 SUITES=public bash ...; CLASS=tf32 SUITES=wide bash ...   (one call each: TF32 trials compile more,
#     ~8 s a shape, ~15 s on VGG-16's b1 layers; the 2026-12-07 H100 run's 60 s + 240 s reached 35 of 55 shapes)
#   On the H200, bf16 with TUNE_S=150 (one suite a call in one command) took 238 s for both suites and tuned all 55.
set -u
OUT=${OUT:-benchmarks/results/class_tuned_round}
CLASS=${CLASS:-tf32}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/nvidia_smi.txt" 2>&1
for suite in ${SUITES:-public wide}; do
    if [ "$CLASS" = tf32 ]; then public_s=170 wide_s=350; else public_s=60 wide_s=240; fi   # whole suites tuned
    if [ "$suite" = public ]; then tune_s=${PUBLIC_TUNE_S:-$public_s}; limit=${PUBLIC_LIMIT_S:-$((tune_s + 130))}
    else tune_s=${TUNE_S:-$wide_s}; limit=${WIDE_LIMIT_S:-$((tune_s + 150))}; fi
    echo "== $CLASS $suite: tune $tune_s s, then calls ($(date -u +%H:%M:%S))"
    timeout "$limit" python3 benchmarks/user_suite.py --class "$CLASS" --no-compile --untuned-too \
        --suite "benchmarks/suites/$suite.json" --tune-budget-s "$tune_s" --tune-budget-trials "${TRIALS:-16}" \
        --db "sqlite:///$OUT/${CLASS}_$suite.db" --calls "${CALLS:-60}" --out "$OUT/${CLASS}_$suite" \
        > "$OUT/${CLASS}_$suite.log" 2>&1
    echo "exit $?"; grep -A4 "geomean speedup" "$OUT/${CLASS}_$suite/user_suite.md" | grep convtune
done
tar -C "$OUT" --exclude='*.db' -czf "/tmp/round.tar.gz" . && mv /tmp/round.tar.gz "$OUT/round.tar.gz"
