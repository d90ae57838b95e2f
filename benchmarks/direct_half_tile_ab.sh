#!/usr/bin/env bash
# The 16-bit direct kernel as it is (each thread's input window read from global memory) against the kernel with its
# input patch in shared memory (benchmarks/ab/direct_half_patch_tile.patch: coalesced fills of the patch and the
# filters), one run: CUDA-event times of fixed configs on few-channel stems, the tree first, then the patch applied
# and the family's GPU tests on it (reverted after). Logs under $OUT. Measured 1.2–2.2× slower on the H200
# (results/direct_half_tile_ab_h200/README.md): not applied.
#   bash benchmarks/direct_half_tile_ab.sh      (on the GPU host)
set -u
OUT=${OUT:-benchmarks/results/direct_half_tile_ab}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv > "$OUT/nvidia_smi.txt" 2>&1
CASES=(
  "N=64 C=3 H=224 W=224 K=32 R=3 S=3 stride=2 pad=1 dtype=bfloat16|16 2 8 4;16 1 16 2;16 4 16 4;32 2 16 4;8 4 32 4;16 2 32 4"
  "N=4 C=3 H=224 W=224 K=13 R=3 S=3 stride=2 pad=1 dtype=bfloat16|16 2 8 4;16 1 16 2;16 4 16 4"
  "N=64 C=1 H=28 W=28 K=20 R=5 S=5 dtype=bfloat16|8 1 8 4;8 2 8 4;16 2 8 4"
  "N=16 C=1 H=224 W=224 K=64 R=7 S=7 stride=2 pad=3 dtype=float16|32 2 32 2;16 4 16 4"
)
for side in global tile; do
    if [ $side = tile ]; then
        patch -p1 --forward < benchmarks/ab/direct_half_patch_tile.patch > /dev/null || { echo "the patch does not apply"; break; }
        timeout "${TESTS_S:-150}" python3 -m pytest -m gpu -q -p no:cacheprovider -W default -x -n "${GPU_TEST_WORKERS:-8}" \
            tests/kernels/direct_half/test_direct_half_gpu.py > "$OUT/gpu_direct_half_tests.txt" 2>&1
        echo "tile | tests | $(tail -1 "$OUT/gpu_direct_half_tests.txt")"
    fi
    for case in "${CASES[@]}"; do
        problem=${case%%|*}
        IFS=';' read -ra configs <<< "${case#*|}"
        for c in "${configs[@]}"; do
            read -r kb pt tx ty <<< "$c"
            echo "$side | $problem | $(python3 benchmarks/igemm_profile.py --problem "$problem" --launches 30 \
                --config "direct_half.fwd k_block=$kb pixels=$pt threads_x=$tx threads_y=$ty" 2>&1 | tail -1)"
        done
    done
done | tee "$OUT/times.txt"
patch -p1 -R --forward < benchmarks/ab/direct_half_patch_tile.patch > /dev/null 2>&1
