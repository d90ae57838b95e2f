#!/usr/bin/env bash
# One device call of experiments on single shapes (runs on the GPU host, after gpu_check.sh's wheel and cubin set-up
# line): for each block of $PROBE_FILE ("problem: <key>" then config keys, one per line, blank line between blocks)
# config_probe.py times the configs against cuDNN in the class, the space's rules bypassed; then Nsight Compute on
# each "ncu: <problem key> | <config key or cudnn>" line, and the stall reasons (warps stalled per issued instruction,
# by reason, and the instruction mix) on each "stalls: <problem key> | <config key>" line. Everything under $WORK, packed into $OUT/probe_round.tgz.
#   bash benchmarks/probe_round.sh benchmarks/probes/yolov3_head.txt
set -uo pipefail
PROBE_FILE=${1:?a probe file}
OUT=${OUT:-benchmarks/results/probe_round}
WORK=${WORK:-/tmp/probe_round}
mkdir -p "$WORK" "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
[ -d /tmp/site ] && export PYTHONPATH=/tmp/site:$PYTHONPATH
NCU_SECTIONS="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
--section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section LaunchStats"
n=0
flush_block() {   # time the block's configs (one process per block: a fault stays in its block)
    [ -n "${problem:-}" ] && [ ${#configs[@]} -gt 0 ] || return 0
    n=$((n + 1))
    echo "== probe $n: $problem"
    timeout "${PROBE_S:-150}" python3 benchmarks/config_probe.py --problem "$problem" --configs "${configs[@]}" \
        --out "$WORK/probe_$n.json" 2>&1 | tee "$WORK/probe_$n.txt" | tail -n 40
    configs=()
}
configs=()
problem=
while IFS= read -r line || [ -n "$line" ]; do
    case $line in
    "#"*) ;;
    "problem: "*) flush_block; problem=${line#problem: } ;;
    "ncu: "*)
        flush_block; problem=
        spec=${line#ncu: }; p=${spec%% | *}; c=${spec#* | }
        echo "== ncu $p | $c" | tee -a "$WORK/ncu.txt"
        if [ "$c" = cudnn ]; then   # every kernel of one late call (cudnn.benchmark settled by then)
            timeout 180 ncu --clock-control none --launch-skip 40 --launch-count 2 $NCU_SECTIONS \
                python3 benchmarks/cudnn_profile.py --problem "$p" --launches 60 >> "$WORK/ncu.txt" 2>&1
        else
            timeout 120 ncu --clock-control none --kernel-name regex:'_fwd$' --launch-skip 3 --launch-count 1 \
                $NCU_SECTIONS python3 benchmarks/igemm_profile.py --problem "$p" --config "$c" >> "$WORK/ncu.txt" 2>&1
        fi
        echo "ncu exit $?" ;;
    "stalls: "*)
        flush_block; problem=
        spec=${line#stalls: }; p=${spec%% | *}; c=${spec#* | }
        echo "== stalls $p | $c" | tee -a "$WORK/stalls.txt"
        timeout 120 ncu --clock-control none --kernel-name regex:'_fwd$' --launch-skip 3 --launch-count 1 \
            --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$,gpu__time_duration.sum,smsp__inst_executed.sum,sm__cycles_active.avg,smsp__warps_active.avg.per_cycle_active' \
            python3 benchmarks/igemm_profile.py --problem "$p" --config "$c" 2>&1 \
            | grep -E "stalled|duration|inst_executed|cycles_active|warps_active" | awk '$NF+0 >= 0.05 || !/stalled/' \
            | tee -a "$WORK/stalls.txt" ;;
    "") flush_block ;;
    *) configs+=("$line") ;;
    esac
done < "$PROBE_FILE"
flush_block
grep -E "^==|^  [a-z_0-9]+.*\(|Duration|DRAM Throughput|Memory Throughput|L2 Hit|Registers Per|Achieved Active|Eligible \
Warps|No Eligible|Issued Warp" "$WORK/ncu.txt" 2>/dev/null | head -80
tar -C "$WORK" -czf "$OUT/probe_round.tgz" .
