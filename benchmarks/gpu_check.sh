#!/usr/bin/env bash
# One device call: GPU tests of the kernels, then the benchmark vs cuDNN; logs and tables under $OUT.
#   run from the repository root on the GPU host:  bash benchmarks/gpu_check.sh [vs_cudnn args...]
set -uo pipefail
OUT=${OUT:-benchmarks/results}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export CONVTUNE_CUBIN_DIR=${CONVTUNE_CUBIN_DIR:-/tmp/convtune-cubins}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$OUT/nvidia_smi.txt"
python3 -c 'import cupy, torch; print("cupy", cupy.__version__, "torch", torch.__version__, "cudnn", torch.backends.cudnn.version())'
echo "== pytest -m gpu (kernels)"
python3 -m pytest -m gpu -q -p no:cacheprovider --maxfail=25 -W default tests/kernels tests/test_machine.py \
    2>&1 | tee "$OUT/gpu_tests.txt" | tail -25
echo "== vs_cudnn"
python3 benchmarks/vs_cudnn.py --out "$OUT" "$@" 2>&1 | tee "$OUT/vs_cudnn.log" | tail -40
