#!/usr/bin/env bash
# GPU-host steps, batched into one device call; logs and tables under $OUT (default benchmarks/results).
#   bash benchmarks/gpu_check.sh STEP...     steps: tests vs_cudnn sample tune
#     tests     pytest -m gpu: kernels vs float64, operator API, the tuner on the GPU
#     all_tests every GPU test file at once, $GPU_TEST_WORKERS (default 6) pytest-xdist workers sharing the GPU
#               (correctness only: no test asserts a wall-clock figure); igemm errors to $OUT/igemm_errors.json
#     igemm_tests the tensor-core family's GPU tests (kernel vs float64 and cuDNN TF32, the ops), xdist workers;
#               errors to $OUT/igemm_errors.json
#     simt_tests the CUDA-core implicit-GEMM family's GPU tests (kernel vs float64, the operator API), xdist workers
#     half_tests the 16-bit tensor-core family's GPU tests (bfloat16 / float16 vs float64 and cuDNN in the dtype);
#               errors to $OUT/igemm_half_errors.json
#     half      benchmarks/vs_cudnn.py --dtype $HALF_DTYPE (default bfloat16): igemm_half vs cuDNN in that dtype
#               ($TF32_TOP configs per family, $TF32_ARGS e.g. --suite); output $OUT/half
#     igemm_ncu Nsight Compute (speed of light, warp stalls, scheduler) of one igemm launch ($IGEMM_PROBLEM, $IGEMM_CONFIG)
#     kernel_ab benchmarks/vs_cudnn.py on $AB_SUITES (default squeeze_excite small_gemm_1x1; $AB_FAMILIES, $AB_TOP,
#               $AB_ARGS e.g. --dtype bfloat16) with the tree as it is, then with $AB_PATCH (default
#               benchmarks/ab/pointwise_odd_epilogue.patch) applied to this copy (reverted after);
#               benchmarks/ab_compare.py tables per suite under $OUT/kernel_ab/
#     choice_ab the untuned op on $CHOICE_AB_ONLY entries ($CHOICE_AB_CLASS, default tf32) before and after
#               $CHOICE_AB_PATCH (default benchmarks/ab/simt_untuned_float32_only.patch), then vs_cudnn.py with
#               $CHOICE_AB_FAMILIES' model-top configs on them
#     fwd_split benchmarks/forward_host_split.py: a single-launch forward's host time split into parts, GPU idle and busy
#     backward_split benchmarks/backward_host_split.py: a depthwise forward + backward's host time split into parts
#     ceilings  benchmarks/device_ceilings.py: GEMM peaks per precision class, copy bandwidth, empty-kernel time
#     tf32      benchmarks/vs_cudnn.py --math tf32: the tensor-core family vs cuDNN TF32 ($TF32_ARGS, e.g. --suite)
#     api_tests pytest -m gpu: only the operator API, the machine probe and the tuner on the GPU
#     dw_tests  pytest -m gpu: the depthwise kernels (every variant × path × mode)
#     torch_tests pytest -m gpu: convtune.ops.torch ops, depthwise ops/tuning, convtune analyze
#     analyze   convtune analyze at the S4ConvD paper shape (table + roofline PNG/SVG; $ANALYZE_ARGS, e.g. --candidates 16)
#     s4convd   benchmarks/s4convd_train.py: S4ConvD training, FFT conv vs convtune.ops.torch ($S4CONVD_ARGS)
#     dw_bench  benchmarks/depthwise_bench.py: depthwise variants × paths vs PyTorch ($DW_BENCH_ARGS)
#     dw_wide   dw_bench on the wide suite's depthwise entries: 1-D ($DW_WIDE_VARIANTS, default warp fast) and 2-D, each
#               process under its own timeout ($DW_WIDE_1D_S, $DW_WIDE_2D_S)
#     dw_dtypes benchmarks/depthwise_dtypes.py: the op's forward in fp32/fp16/bf16 vs PyTorch in the same dtype
#     dw_half_tests pytest -m gpu: 16-bit depthwise kernels, the packed 2-D kernel, the torch ops
#     wino_large pytest -m gpu: the large-filter Winograd family (winograd_unfused_large: 5×5, 7×7), the 1-D one
#               (winograd_unfused_1d: 1×r, r×1) and the 3×3 Winograd
#               paths, xdist workers
#     wino_3xtf32 the experimental 3xTF32 Winograd family (winograd_unfused_3xtf32: 3×3, 5×5, 7×7): its GPU tests
#               and the TF32 Winograd family's, then vs_cudnn.py strict fp32 on six 5×5 / 7×7 wide entries (it and the
#               fp32 large family) and on the public suite's ten 3×3 entries (it and the fp32 direct and Winograd
#               families), $WINO3_TOP configs each, cuDNN fp32 in the same runs; then AlexNet conv2's kernel breakdown
#     wino_passes the unfused Winograd paths in passes over the batch (images_per_pass, experimental): their GPU tests
#               (bitwise against one pass, float64), then benchmarks/winograd_passes_ab.py on AlexNet conv2 and the
#               big-batch 3×3 entries ($PASSES_S per run): one pass against the L2-sized passes, cold and hot
#     protocol  benchmarks/protocol_ab.py: the same configs timed cold (the tuner's rotation) and hot (back to back) on
#               the shapes whose tuned config lost to the untuned one through the op ($PROTOCOL_S per class)
#     wino_1d   the 1-D Winograd family's GPU tests, then vs_cudnn.py (it, direct, igemm_simt; $WINO_1D_FAMILIES,
#               $WINO_1D_TOP configs each) on the wide suite's six asymmetric 1×n / n×1 entries
#     res_1x1   the 16-bit 1×1 families (igemm_wgmma_half_1x1 and its persistent, filters-resident variant): their GPU
#               tests (xdist workers), then vs_cudnn.py --dtype $HALF_DTYPE (default bfloat16) on benchmarks/suites/
#               conv1x1.json with both 1×1 families and the general 16-bit one ($RES_1X1_TOP configs each, default 16)
#     pingpong  the 16-bit ping-pong 1×1 family (warpgroups taking turns over a block's tiles): its GPU cases (xdist
#               workers), then vs_cudnn.py --dtype $HALF_DTYPE (default bfloat16) on benchmarks/suites/conv1x1.json
#               with it and the two other 16-bit 1×1 families ($RES_1X1_TOP configs each, default 16)
#     tma_1x1   the TMA-fed 16-bit 1×1 family: its GPU cases (xdist
#               workers), then vs_cudnn.py --dtype $HALF_DTYPE (default bfloat16) on benchmarks/suites/conv1x1.json
#               with it and the resident 1×1 family ($RES_1X1_TOP configs each, default 16; $RES_1X1_ONLY: entries)
#     tma_1x1_calls the conv1x1 suite (or $TMA_1X1_CALLS_SUITE) through the op in bf16 vs cuDNN bf16, tuned = the fastest rows
#               of the H100 bf16 reports and the tma_1x1 step's (a replay table made on the host), untuned too
#     tma_1x1_tf32 the TMA-fed TF32 1×1 family: its GPU cases, then vs_cudnn.py --math tf32 on
#               benchmarks/suites/conv1x1.json with it and the resident TF32 1×1 family ($RES_1X1_TOP, $RES_1X1_ONLY)
#     n96       the general kernel's 96/192-column tiles (igemm_wgmma_n96, igemm_wgmma_half_n96): their GPU cases
#               (TF32, bf16, fp16; $N96_TESTS_S, 0 skips), then vs_cudnn.py per class ($N96_CLASSES, default
#               "tf32 bfloat16") on benchmarks/suites/n96.json with them and the general family of the class ($N96_TOP
#               configs each, default 16)
#     n96_calls a replay table per class (the H100 reports of tma_1x1_round.sh's h100 preset and the n96 step's run
#               under $N96_FROM, default $OUT), then benchmarks/suites/n96.json (or $N96_CALLS_SUITE) through the op
#               against cuDNN in the class: tuned = the table's fastest config, and untuned
#     n96_untuned benchmarks/suites/n96.json through the op untuned (the models' choice, an empty database) per class
#               ($N96_CLASSES): the runs untuned_choices_table.py --update takes to bring the guard tables' superseded
#               rows back (the 96/192-column families moved them)
#     res_1x1_tf32 the TF32 1×1 families (igemm_wgmma_1x1 and its persistent, filters-resident variant): their GPU
#               cases (xdist workers), then vs_cudnn.py --math tf32 on benchmarks/suites/conv1x1.json with both, the
#               mma.sync 1×1 family and the general TF32 wgmma one ($RES_1X1_TOP configs each, default 16)
#     direct_half the 16-bit direct family (CUDA cores, C ≤ 16): its GPU tests (xdist workers), then vs_cudnn.py
#               --dtype $HALF_DTYPE (default bfloat16) on benchmarks/suites/stems.json with it and the 16-bit
#               tensor-core families that take stems ($DIRECT_HALF_TOP configs each, default 16)
#     vs_cudnn  benchmarks/vs_cudnn.py (best of the model's top configs vs cuDNN, same run)
#     sample    benchmarks/space_sample.py (uniform sample of the unpruned direct space on 3 shapes; $SAMPLE_ARGS,
#               e.g. the out-of-sample 5×5 shapes with --budget-s / --resume: see its docstring)
#     tune      `convtune tune` on every public conv2d shape (budget $TUNE_BUDGET_S s each) + cuDNN
#     retime    benchmarks/retime.py: the tuned and brute-force configs of $OUT/tune_suite.json, interleaved
#     wsweep    benchmarks/winograd_sweep.py: sampled fused-Winograd configs per 3×3 stride-1 shape vs cuDNN
#     batch     benchmarks/serve_batch.py: `convtune serve` + POST /v1/batches {"preset": $BATCH_PRESET}
#     dense_torch_tests pytest -m gpu: prepared launches of every family, the pointwise kernel, convtune.ops.torch.conv2d / modules / graphs /
#               torch.compile / tune(model), the depthwise ops, the operator API
#     call_overhead benchmarks/call_overhead.py: host/kernel µs per call, convtune vs PyTorch ($CALL_OVERHEAD_ARGS)
#     user_suite benchmarks/user_suite.py: the public conv2d suite via convtune.ops.torch.conv2d vs cuDNN fp32, eager,
#               CUDA graph, torch.compile (tuned configs from $USER_SUITE_DB, e.g. the tune step's database, or
#               tuned first for $USER_SUITE_TUNE_S seconds in all into $USER_SUITE_DB / /tmp/convtune-user-suite.db)
#     dw_suite  benchmarks/dw_user_suite.py: the wide suite's depthwise entries through convtune.ops.torch vs PyTorch fp32,
#               forward and forward + backward, kernel (profiler), eager and graph µs, input sets rotated past 2× L2
#               ($DW_SUITE_ARGS, e.g. --plans-from a depthwise_bench.json report)
#     residue   benchmarks/profiler_residue.py: eager and graph walls before and after a CUDA profiler session, same
#               process ($RESIDUE_CLASS, $RESIDUE_TABLE, $RESIDUE_ENTRIES of the wide suite)
#     eager_profile benchmarks/eager_profile.py: cProfile of converted models' eager forwards ($EAGER_PROFILE_MODELS,
#               name:batch, default vgg16:1 resnet50:32 mobilenet_v2:32; untuned: the models' choices)
#     epilogue  benchmarks/epilogue_bench.py: the fused epilogue (bias_act) vs PyTorch's BN + add + activation
#     models    benchmarks/model_inference.py: $MODELS (default resnet50 vgg16 mobilenet_v2) tuned
#               ($MODEL_BUDGET_S s, $MODEL_BUDGET_TRIALS trials per convolution; $MODEL_DB; $MODEL_MATH ieee|tf32|bf16)
#               and converted vs cuDNN ($MODEL_FUSE=1: convtune's side fused, cuDNN folded as a second baseline;
#               $MODEL_PRECOMPILE=N: first the tuner's N first trials of every layer compiled in parallel for preset
#               $MODEL_MACHINE, default h100)
# Python packages missing on the host (optuna, sqlalchemy, ...) come as wheels in .whl/
# (../shared/tools/device-wheels); they are installed first when present.
set -uo pipefail
OUT=${OUT:-benchmarks/results}
mkdir -p "$OUT"
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export CONVTUNE_CUBIN_DIR=${CONVTUNE_CUBIN_DIR:-/tmp/convtune-cubins}
# cubins compiled off the GPU host (space_sample.py --compile-only; tar cJf cubins.tar.xz .cubins) travel as
# cubins.tar.xz (carry it): unpacked into the cubin cache, so the kernels load instead of compiling on device time
if [ -f cubins.tar.xz ]; then
    mkdir -p "$CONVTUNE_CUBIN_DIR" && tar xJf cubins.tar.xz --strip-components=1 -C "$CONVTUNE_CUBIN_DIR" \
        && echo "cubins.tar.xz: $(ls "$CONVTUNE_CUBIN_DIR" | wc -l) cubins in $CONVTUNE_CUBIN_DIR"
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$OUT/nvidia_smi.txt"
for step in "$@"; do
    echo "== $step ($(date -u +%H:%M:%S))"
    case $step in
    tests)
        python3 -m pytest -m gpu -q -p no:cacheprovider --maxfail=25 -W default \
            tests/kernels tests/test_machine.py tests/tuner/test_tuner_gpu.py 2>&1 | tee "$OUT/gpu_tests.txt" | tail -15 ;;
    all_tests)
        CONVTUNE_ERROR_TABLE="$OUT/igemm_errors.json" python3 -m pytest -m gpu -q -p no:cacheprovider -W default -ra \
            -n "${GPU_TEST_WORKERS:-6}" --dist loadfile tests/kernels tests/test_machine.py tests/tuner/test_tuner_gpu.py \
            tests/tuner/test_depthwise_tuning.py tests/ops tests/analysis/test_analyze.py 2>&1 \
            | tee "$OUT/gpu_all_tests.txt" | tail -40 ;;
    igemm_tests)
        CONVTUNE_ERROR_TABLE="$OUT/igemm_errors.json" python3 -m pytest -m gpu -q -p no:cacheprovider -W default -ra \
            -n "${GPU_TEST_WORKERS:-6}" tests/kernels/igemm 2>&1 | tee "$OUT/gpu_igemm_tests.txt" | tail -20 ;;
    simt_tests)
        python3 -m pytest -m gpu -q -p no:cacheprovider -W default -ra -n "${GPU_TEST_WORKERS:-6}" \
            tests/kernels/igemm_simt 2>&1 | tee "$OUT/gpu_igemm_simt_tests.txt" | tail -20 ;;
    half_tests)
        CONVTUNE_ERROR_TABLE_HALF="$OUT/igemm_half_errors.json" python3 -m pytest -m gpu -q -p no:cacheprovider \
            -W default -ra -n "${GPU_TEST_WORKERS:-6}" tests/kernels/igemm/test_igemm_half_gpu.py 2>&1 \
            | tee "$OUT/gpu_igemm_half_tests.txt" | tail -20 ;;
    half)
        python3 benchmarks/vs_cudnn.py --dtype "${HALF_DTYPE:-bfloat16}" --top "${TF32_TOP:-16}" --out "$OUT/half" \
            ${TF32_ARGS:-} 2>&1 | tee "$OUT/half.log" | tail -30 ;;
    igemm_ncu)
        ncu --clock-control none --kernel-name regex:"${IGEMM_KERNEL:-igemm_(nhwc_)?fwd}" --launch-skip 3 --launch-count 1 --section SpeedOfLight \
            --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy \
            --section MemoryWorkloadAnalysis python3 benchmarks/igemm_profile.py \
            --problem "${IGEMM_PROBLEM:-N=32 C=256 H=56 W=56 K=256 R=3 S=3 pad=1 math=tf32}" \
            --config "${IGEMM_CONFIG:-igemm.fwd tile_m=128 tile_n=128 tile_k=16 warps_m=2 warps_n=2 stages=3 splits=1}" \
            2>&1 | tee "$OUT/igemm_ncu.txt" | tail -60 ;;
    ceilings)
        python3 benchmarks/device_ceilings.py --out "$OUT/ceilings" 2>&1 | tee "$OUT/ceilings.log" | tail -16 ;;
    tf32)
        python3 benchmarks/vs_cudnn.py --math tf32 --top "${TF32_TOP:-16}" --out "$OUT/tf32" ${TF32_ARGS:-} 2>&1 \
            | tee "$OUT/tf32.log" | tail -30 ;;
    api_tests)
        python3 -m pytest -m gpu -q -p no:cacheprovider -W default tests/ops/test_ops_gpu.py tests/test_machine.py \
            tests/tuner/test_tuner_gpu.py 2>&1 | tee "$OUT/gpu_api_tests.txt" | tail -8 ;;
    dw_tests)
        python3 -m pytest -m gpu -q -p no:cacheprovider -W default --maxfail=60 -ra tests/kernels/depthwise/test_depthwise_gpu.py \
            tests/kernels/depthwise/test_depthwise2d_packed.py 2>&1 | tee "$OUT/gpu_depthwise_tests.txt" | tail -30 ;;
    torch_tests)
        python3 -m pytest -m gpu -q -p no:cacheprovider -W default -ra tests/ops/torch/test_torch_ops.py tests/ops/test_depthwise_ops.py \
            tests/analysis/test_analyze.py tests/tuner/test_depthwise_tuning.py tests/kernels/test_registry.py 2>&1 \
            | tee "$OUT/gpu_torch_tests.txt" | tail -25 ;;
    analyze)
        python3 -m convtune.cli analyze B=16384 C=128 L=48 K=48 --variants all --paths fwd,dgrad,wgrad \
            ${ANALYZE_ARGS:-} --out "$OUT/analyze_paper" 2>&1 | tee "$OUT/analyze.log" | tail -30 ;;
    s4convd)
        python3 benchmarks/s4convd_train.py ${S4CONVD_ARGS:-} --out "$OUT/s4convd_train.json" 2>&1 \
            | tee "$OUT/s4convd_train.log" | tail -20 ;;
    dw_bench)
        python3 benchmarks/depthwise_bench.py --out "$OUT" ${DW_BENCH_ARGS:-} 2>&1 | tee "$OUT/depthwise_bench.log" | tail -40 ;;
    dw_wide)   # the wide suite's depthwise entries, 1-D and 2-D in two processes (a timeout of one keeps the other)
        names_2d=$(python3 -c "import json; print(' '.join(e['name'] for e in json.load(open('benchmarks/suites/wide.json'))['depthwise2d']))")
        timeout "${DW_WIDE_1D_S:-240}" python3 benchmarks/depthwise_bench.py --suite benchmarks/suites/wide.json --no-2d \
            --variants ${DW_WIDE_VARIANTS:-warp fast} --candidates "${DW_WIDE_CANDIDATES:-6}" --out "$OUT/dw_wide_1d" \
            2>&1 | tee "$OUT/dw_wide_1d.log" | tail -12
        timeout "${DW_WIDE_2D_S:-300}" python3 benchmarks/depthwise_bench.py --suite benchmarks/suites/wide.json \
            --only $names_2d --candidates-2d "${DW_WIDE_CANDIDATES_2D:-16}" --candidates-packed 8 --out "$OUT/dw_wide_2d" \
            2>&1 | tee "$OUT/dw_wide_2d.log" | tail -12 ;;
    dw_dtypes)
        python3 benchmarks/depthwise_dtypes.py --out "$OUT" 2>&1 | tee "$OUT/depthwise_dtypes.log" | tail -30 ;;
    dw_half_tests)
        python3 -m pytest -m gpu -q -p no:cacheprovider -W default --maxfail=40 -ra \
            tests/kernels/depthwise/test_depthwise_half_gpu.py tests/kernels/depthwise/test_depthwise2d_packed.py tests/ops/torch/test_torch_ops.py \
            tests/ops/test_depthwise_ops.py 2>&1 | tee "$OUT/gpu_depthwise_half_tests.txt" | tail -30 ;;
    wino_large)
        python3 -m pytest -m gpu -q -p no:cacheprovider -W default -ra -n "${GPU_TEST_WORKERS:-6}" --dist loadfile \
            tests/kernels/winograd/test_winograd_large_gpu.py tests/kernels/winograd/test_winograd_1d_gpu.py \
            tests/kernels/winograd/test_winograd_gpu.py 2>&1 \
            | tee "$OUT/gpu_winograd_large_tests.txt" | tail -15 ;;
    wino_3xtf32)   # the experimental 3xTF32 Winograd family: its GPU tests (and the TF32 family's, whose GEMM body it
                   # shares), then vs_cudnn.py in strict fp32 on 5×5 / 7×7 wide entries against the fp32 large-filter
                   # family and on the public 3×3 entries against the fp32 direct and Winograd families (cuDNN fp32 in
                   # both), then AlexNet conv2's kernels (the model's choice)
        export CONVTUNE_EXPERIMENTAL=winograd_unfused_3xtf32,winograd_unfused_tf32
        timeout "${WINO3_TESTS_S:-240}" python3 -m pytest -m gpu -q -p no:cacheprovider -W default -ra \
            -n "${GPU_TEST_WORKERS:-6}" tests/kernels/winograd/test_winograd_3xtf32_gpu.py \
            tests/kernels/winograd/test_winograd_unfused_tf32_gpu.py 2>&1 | tee "$OUT/gpu_winograd_3xtf32_tests.txt" \
            | tail -8
        timeout "${WINO3_BENCH_S:-300}" python3 benchmarks/vs_cudnn.py --suite benchmarks/suites/wide.json \
            --only alexnet_conv2_b64 openpose_stage2_conv1_b4 openpose_stage2_conv3_b4 inception_v3_mixed5b_5x5_b8 \
            googlenet_inc3a_5x5_b16 googlenet_inc5b_5x5_b8 \
            --families winograd_unfused_large winograd_unfused_3xtf32 --top "${WINO3_TOP:-12}" --buckets 8 \
            --out "$OUT/wino_3xtf32" 2>&1 | tee "$OUT/wino_3xtf32_vs_cudnn.log" | tail -20
        timeout "${WINO3_PUBLIC_S:-300}" python3 benchmarks/vs_cudnn.py --suite benchmarks/suites/public.json \
            --only vgg16_conv1_2_b1 vgg16_conv2_2_b1 vgg16_conv3_2_b1 vgg16_conv4_2_b1 vgg16_conv5_2_b1 \
            vgg16_conv3_2_b32 resnet50_3x3_64_b32 resnet50_3x3_128_b32 resnet50_3x3_256_b32 resnet50_3x3_512_b32 \
            --families direct winograd winograd_unfused winograd_unfused_3xtf32 --top "${WINO3_TOP:-12}" --buckets 8 \
            --out "$OUT/wino_3xtf32_public" 2>&1 | tee "$OUT/wino_3xtf32_public_vs_cudnn.log" | tail -20
        timeout 120 python3 benchmarks/kernel_breakdown.py "N=64 C=64 H=27 W=27 K=192 R=5 S=5 pad=2" \
            --out "$OUT/wino_3xtf32_breakdown" 2>&1 | tail -20 ;;
    wino_passes)   # the unfused Winograd paths in passes over the batch: correctness, then one pass vs passes
        export CONVTUNE_EXPERIMENTAL=winograd_unfused_3xtf32,winograd_unfused_tf32,winograd_passes
        timeout "${PASSES_TESTS_S:-150}" python3 -m pytest -m gpu -q -p no:cacheprovider -W default -ra \
            -n "${GPU_TEST_WORKERS:-6}" tests/kernels/winograd/test_winograd_passes_gpu.py 2>&1 \
            | tee "$OUT/gpu_winograd_passes_tests.txt" | tail -8
        timeout "${PASSES_S:-150}" python3 benchmarks/winograd_passes_ab.py --suite benchmarks/suites/wide.json \
            --only alexnet_conv2_b64 --families winograd_unfused_large winograd_unfused_3xtf32 \
            --out "$OUT/wino_passes_alexnet" 2>&1 | tail -30
        timeout "${PASSES_S:-150}" python3 benchmarks/winograd_passes_ab.py --suite benchmarks/suites/public.json \
            --only vgg16_conv3_2_b32 resnet50_3x3_64_b32 resnet50_3x3_128_b32 --top 2 \
            --families winograd_unfused winograd_unfused_3xtf32 --out "$OUT/wino_passes_public" 2>&1 | tail -40 ;;
    protocol)   # cold- vs hot-L2 ranking (benchmarks/protocol_ab.py) on the shapes whose tuned config lost to the untuned
                # one through the op in the 2026-12-07 class rounds: bf16 1×1 (resident vs TMA), bf16 and TF32 others
        timeout "${PROTOCOL_S:-150}" python3 benchmarks/protocol_ab.py --dtype bfloat16 --suite benchmarks/suites/conv1x1.json \
            --only yolov3_head_52_b8 openpose_stage1_paf_b4 faster_rcnn_rpn_bbox_b1 resnet50_1x1_256_64_b32 \
            --families igemm_wgmma_half_1x1_resident igemm_wgmma_half_1x1_tma igemm_wgmma_half_1x1 \
            --out "$OUT/protocol_bf16_1x1" 2>&1 | tail -40
        timeout "${PROTOCOL_S:-150}" python3 benchmarks/protocol_ab.py --dtype bfloat16 --suite benchmarks/suites/wide.json \
            --only resnet50_layer3_conv2_s2_b16 resnet50_layer2_conv2_s2_b16 deeplabv2_aspp_d24_b1 \
            --families igemm_wgmma_half igemm_half --out "$OUT/protocol_bf16" 2>&1 | tail -40
        timeout "${PROTOCOL_S:-150}" python3 benchmarks/protocol_ab.py --math tf32 --suite benchmarks/suites/wide.json \
            --only googlenet_inc4a_5x5_b16 alexnet_conv1_b1 --families direct igemm igemm_wgmma \
            --out "$OUT/protocol_tf32" 2>&1 | tail -40 ;;
    wino_1d)   # the 1-D Winograd family: its GPU tests, then vs_cudnn.py on the wide suite's asymmetric entries
        timeout "${WINO_1D_TESTS_S:-240}" python3 -m pytest -m gpu -q -p no:cacheprovider -W default -ra \
            -n "${GPU_TEST_WORKERS:-6}" tests/kernels/winograd/test_winograd_1d_gpu.py 2>&1 \
            | tee "$OUT/gpu_winograd_1d_tests.txt" | tail -8
        timeout "${WINO_1D_BENCH_S:-240}" python3 benchmarks/vs_cudnn.py --suite benchmarks/suites/wide.json \
            --only inception_v3_mixed6b_1x7_b8 inception_v3_mixed6b_7x1_b8 inception_v3_mixed6c_1x7_b16 \
            inception_v3_mixed6c_7x1_b16 inception_v3_mixed7b_1x3_b8 inception_v3_mixed7b_3x1_b8 \
            --families ${WINO_1D_FAMILIES:-winograd_unfused_1d direct igemm_simt} --top "${WINO_1D_TOP:-12}" \
            --buckets 8 --out "$OUT/wino_1d" 2>&1 | tee "$OUT/wino_1d_vs_cudnn.log" | tail -30 ;;
    res_1x1)
        timeout "${RES_1X1_TESTS_S:-240}" python3 -m pytest -m gpu -q -p no:cacheprovider -W default -ra \
            -n "${GPU_TEST_WORKERS:-6}" tests/kernels/igemm_wgmma/test_igemm_wgmma_half_gpu.py -k "1x1 or res_" 2>&1 \
            | tee "$OUT/gpu_res_1x1_tests.txt" | tail -12
        timeout "${RES_1X1_BENCH_S:-300}" python3 benchmarks/vs_cudnn.py --dtype "${HALF_DTYPE:-bfloat16}" \
            --top "${RES_1X1_TOP:-16}" --buckets 0 --suite benchmarks/suites/conv1x1.json --out "$OUT/res_1x1" \
            --families igemm_wgmma_half_1x1 igemm_wgmma_half_1x1_resident igemm_wgmma_half 2>&1 \
            | tee "$OUT/res_1x1.log" | tail -40 ;;
    pingpong)
        timeout "${RES_1X1_TESTS_S:-240}" python3 -m pytest -m gpu -q -p no:cacheprovider -W default -ra \
            -n "${GPU_TEST_WORKERS:-6}" tests/kernels/igemm_wgmma/test_igemm_wgmma_half_gpu.py -k "pp_" 2>&1 \
            | tee "$OUT/gpu_pingpong_tests.txt" | tail -12
        timeout "${RES_1X1_BENCH_S:-300}" python3 benchmarks/vs_cudnn.py --dtype "${HALF_DTYPE:-bfloat16}" \
            --top "${RES_1X1_TOP:-16}" --buckets 0 --suite benchmarks/suites/conv1x1.json --out "$OUT/pingpong" \
            --families igemm_wgmma_half_1x1 igemm_wgmma_half_1x1_resident igemm_wgmma_half_1x1_pingpong 2>&1 \
            | tee "$OUT/pingpong.log" | tail -40 ;;
    tma_1x1)
        [ "${RES_1X1_TESTS_S:-240}" = 0 ] || timeout "${RES_1X1_TESTS_S:-240}" python3 -m pytest -m gpu -q -p no:cacheprovider -W default -ra \
            -n "${GPU_TEST_WORKERS:-6}" tests/kernels/igemm_wgmma/test_igemm_wgmma_half_gpu.py -k "tma1x1_" 2>&1 \
            | tee "$OUT/gpu_tma_1x1_tests.txt" | tail -12
        timeout "${RES_1X1_BENCH_S:-300}" python3 benchmarks/vs_cudnn.py --dtype "${HALF_DTYPE:-bfloat16}" \
            --top "${RES_1X1_TOP:-16}" --buckets 0 --suite benchmarks/suites/conv1x1.json --out "$OUT/tma_1x1" \
            --families igemm_wgmma_half_1x1_resident igemm_wgmma_half_1x1_tma ${RES_1X1_ONLY:+--only $RES_1X1_ONLY} 2>&1 \
            | tee "$OUT/tma_1x1.log" | tail -40 ;;
    tma_1x1_calls)   # the 1x1 suite through the op in bf16: tuned = the bf16 replay table remade with the tma_1x1 rows
        . benchmarks/replay_reports.sh
        # shellcheck disable=SC2086  # the report list splits on whitespace
        python3 benchmarks/make_replay.py $H100_BF16_REPORTS "$OUT/tma_1x1/vs_cudnn_bf16.json" \
            -o "$OUT/replay_h100_bf16.json.gz" 2>&1 | tail -4
        timeout "${TMA_1X1_CALLS_S:-240}" python3 benchmarks/user_suite.py --class bfloat16 --no-compile --untuned-too \
            --suite "${TMA_1X1_CALLS_SUITE:-benchmarks/suites/conv1x1.json}" --configs-from "$OUT/replay_h100_bf16.json.gz" \
            --out "$OUT/calls_bf16_conv1x1" 2>&1 | tee "$OUT/calls_bf16_conv1x1.log" | tail -24 ;;
    tma_1x1_tf32)   # the TMA-fed TF32 1x1 family: its GPU cases (NVRTC: nvcc hidden, so the module's other
                    # kernels are not precompiled), then the 1x1 layers in TF32 against cuDNN TF32 with the resident one
        [ "${RES_1X1_TESTS_S:-240}" = 0 ] || (export PATH=$(echo "$PATH" | tr ':' '\n' | grep -v cuda | paste -sd:); \
            timeout "${RES_1X1_TESTS_S:-240}" python3 -m pytest -m gpu -q -p no:cacheprovider -p no:benchmark -W default \
            -ra -n "${GPU_TEST_WORKERS:-14}" tests/kernels/igemm_wgmma/test_igemm_wgmma_gpu.py -k "tma1x1_" 2>&1 \
            | tee "$OUT/gpu_tma_1x1_tf32_tests.txt" | tail -12)
        timeout "${RES_1X1_BENCH_S:-300}" python3 benchmarks/vs_cudnn.py \
            --math tf32 --top "${RES_1X1_TOP:-16}" --buckets 0 --suite benchmarks/suites/conv1x1.json \
            --out "$OUT/tma_1x1_tf32" --families igemm_wgmma_1x1_resident igemm_wgmma_1x1_tma \
            ${RES_1X1_ONLY:+--only $RES_1X1_ONLY} 2>&1 | tee "$OUT/tma_1x1_tf32.log" | tail -40 ;;
    n96)   # the 96/192-column tiles: GPU cases, then per class vs_cudnn.py with the general family of the class
        [ "${N96_TESTS_S:-240}" = 0 ] || (export PATH=$(echo "$PATH" | tr ':' '\n' | grep -v cuda | paste -sd:); \
            timeout "${N96_TESTS_S:-240}" python3 -m pytest -m gpu -q -p no:cacheprovider -p no:benchmark -W default \
            -ra -n "${GPU_TEST_WORKERS:-14}" tests/kernels/igemm_wgmma/test_igemm_wgmma_n96_gpu.py 2>&1 \
            | tee "$OUT/gpu_n96_tests.txt" | tail -12)
        for cls in ${N96_CLASSES:-tf32 bfloat16}; do
            if [ "$cls" = tf32 ]; then args=(--math tf32); fams=(igemm_wgmma igemm_wgmma_n96)
            else args=(--dtype "$cls"); fams=(igemm_wgmma_half igemm_wgmma_half_n96); fi
            timeout "${N96_BENCH_S:-200}" python3 benchmarks/vs_cudnn.py "${args[@]}" --top "${N96_TOP:-16}" \
                --buckets 0 --suite benchmarks/suites/n96.json --out "$OUT/n96_$cls" --families "${fams[@]}" 2>&1 \
                | tee "$OUT/n96_$cls.log" | tail -24
        done ;;
    n96_calls)   # per class: a replay table (the H100 reports and the n96 step's run), then the suite through the op
        . benchmarks/replay_reports.sh
        for cls in ${N96_CLASSES:-tf32 bfloat16}; do
            if [ "$cls" = tf32 ]; then tag=tf32; reports="$H100_TF32_REPORTS $H100_TMA_1X1_TF32"
            else tag=bf16; reports="$H100_BF16_REPORTS $H100_TMA_1X1_BF16"; fi
            # shellcheck disable=SC2086  # the report list splits on whitespace
            python3 benchmarks/make_replay.py $reports "${N96_FROM:-$OUT}/n96_$cls/vs_cudnn_$tag.json" \
                -o "$OUT/replay_h100_n96_$tag.json.gz" 2>&1 | tail -3
            timeout "${N96_CALLS_S:-200}" python3 benchmarks/user_suite.py --class "$cls" --no-compile --untuned-too \
                --suite "${N96_CALLS_SUITE:-benchmarks/suites/n96.json}" --configs-from "$OUT/replay_h100_n96_$tag.json.gz" \
                --out "$OUT/calls_n96_$tag" 2>&1 | tee "$OUT/calls_n96_$tag.log" | tail -24
        done ;;
    n96_untuned)   # the n96 suite through the op untuned per class: the guard tables' --update runs
        for cls in ${N96_CLASSES:-tf32 bfloat16}; do
            timeout "${N96_CALLS_S:-200}" python3 benchmarks/user_suite.py --class "$cls" --no-compile \
                --suite benchmarks/suites/n96.json --db "sqlite:////tmp/convtune-n96-untuned-$cls.db" \
                --out "$OUT/untuned_n96_$cls" 2>&1 | tee "$OUT/untuned_n96_$cls.log" | tail -20
        done ;;
    res_1x1_tf32)   # the persistent TF32 1x1 family: its GPU cases, then the 1x1 layers in TF32 against cuDNN TF32
        timeout "${RES_1X1_TESTS_S:-240}" python3 -m pytest -m gpu -q -p no:cacheprovider -W default -ra \
            -n "${GPU_TEST_WORKERS:-6}" tests/kernels/igemm_wgmma/test_igemm_wgmma_gpu.py -k "res_ or 1x1_" 2>&1 \
            | tee "$OUT/gpu_res_1x1_tf32_tests.txt" | tail -12
        timeout "${RES_1X1_BENCH_S:-300}" python3 benchmarks/vs_cudnn.py --math tf32 \
            --top "${RES_1X1_TOP:-16}" --buckets 0 --suite benchmarks/suites/conv1x1.json --out "$OUT/res_1x1_tf32" \
            --families igemm_wgmma_1x1 igemm_wgmma_1x1_resident igemm_1x1 igemm_wgmma 2>&1 \
            | tee "$OUT/res_1x1_tf32.log" | tail -40 ;;
    direct_half)
        timeout "${DIRECT_HALF_TESTS_S:-200}" python3 -m pytest -m gpu -q -p no:cacheprovider -W default -ra \
            -n "${GPU_TEST_WORKERS:-6}" tests/kernels/direct_half/test_direct_half_gpu.py 2>&1 \
            | tee "$OUT/gpu_direct_half_tests.txt" | tail -12
        timeout "${DIRECT_HALF_BENCH_S:-300}" python3 benchmarks/vs_cudnn.py --dtype "${HALF_DTYPE:-bfloat16}" \
            --top "${DIRECT_HALF_TOP:-16}" --buckets 0 --suite benchmarks/suites/stems.json --out "$OUT/direct_half" \
            --families direct_half igemm_wgmma_half igemm_half 2>&1 | tee "$OUT/direct_half.log" | tail -30 ;;
    vs_cudnn)
        python3 benchmarks/vs_cudnn.py --out "$OUT" ${VS_CUDNN_ARGS:-} 2>&1 | tee "$OUT/vs_cudnn.log" | tail -30 ;;
    sample)
        python3 benchmarks/space_sample.py --out "$OUT" ${SAMPLE_ARGS:-} 2>&1 | tee "$OUT/space_sample.log" | tail -8 ;;
    tune)
        python3 benchmarks/tune_suite.py --out "$OUT" --budget-s "${TUNE_BUDGET_S:-60}" ${TUNE_ARGS:-} 2>&1 \
            | tee "$OUT/tune_suite.log" | tail -25 ;;
    retime)
        python3 benchmarks/retime.py --pairs-from "$OUT/tune_suite.json" --out "$OUT" 2>&1 \
            | tee "$OUT/retime.log" | tail -15 ;;
    wsweep)
        python3 benchmarks/winograd_sweep.py --out "$OUT" ${WSWEEP_ARGS:-} 2>&1 | tee "$OUT/winograd_sweep.log" | tail -14 ;;
    batch)
        python3 benchmarks/serve_batch.py --preset "${BATCH_PRESET:-resnet18}" --budget-s "${BATCH_BUDGET_S:-25}" \
            --out "$OUT/batch_${BATCH_PRESET:-resnet18}" --db /tmp/convtune-service.db 2>&1 | tee "$OUT/serve_batch.log" | tail -20 ;;
    dense_torch_tests)
        python3 -m pytest -m gpu -q -p no:cacheprovider -W default --maxfail=40 -ra tests/kernels/test_prepared_gpu.py \
            tests/kernels/pointwise/test_pointwise_gpu.py \
            tests/ops/torch/test_torch_dense_gpu.py tests/ops/test_ops_gpu.py tests/ops/torch/test_torch_ops.py tests/ops/torch/test_torch_dense.py \
            tests/ops/test_call_cache.py tests/ops/torch/test_torch_tune.py 2>&1 | tee "$OUT/gpu_dense_torch_tests.txt" | tail -30 ;;
    epilogue)
        python3 benchmarks/epilogue_bench.py --out "$OUT/epilogue" 2>&1 | tee "$OUT/epilogue.log" | tail -25 ;;
    call_overhead)
        python3 benchmarks/call_overhead.py --out "$OUT/call_overhead" ${CALL_OVERHEAD_ARGS:-} 2>&1 \
            | tee "$OUT/call_overhead.log" | tail -45 ;;
    kernel_ab)   # vs_cudnn.py on $AB_SUITES before and after $AB_PATCH is applied to this copy of the tree (reverted)
        patch_file=${AB_PATCH:-benchmarks/ab/pointwise_odd_epilogue.patch}
        mkdir -p "$OUT/kernel_ab"
        for side in before after; do
            if [ $side = after ] && ! patch -p1 --forward < "$patch_file"; then echo "kernel_ab: $patch_file does not apply"; break; fi
            for suite in ${AB_SUITES:-squeeze_excite small_gemm_1x1}; do
                python3 benchmarks/vs_cudnn.py --out "$OUT/kernel_ab/$side/$suite" --suite "benchmarks/suites/$suite.json" \
                    --families ${AB_FAMILIES:-pointwise pointwise_sliced direct igemm_simt} --top "${AB_TOP:-8}" \
                    --buckets 0 ${AB_ARGS:-} > "$OUT/kernel_ab/$side.$suite.log" 2>&1 || echo "kernel_ab: $side $suite failed"
                # a flat copy: the device tool brings back nothing nested deeper than $OUT/a/b/
                for f in "$OUT/kernel_ab/$side/$suite"/vs_cudnn*; do
                    [ -e "$f" ] && cp "$f" "$OUT/kernel_ab/$side.$suite.${f##*.}"
                done
            done
        done
        patch -p1 -R --forward < "$patch_file" > /dev/null 2>&1
        for suite in ${AB_SUITES:-squeeze_excite small_gemm_1x1}; do
            # vs_cudnn.json, or vs_cudnn_<class>.json for a TF32 or 16-bit run ($AB_ARGS)
            python3 benchmarks/ab_compare.py "$OUT"/kernel_ab/before/"$suite"/vs_cudnn*.json \
                "$OUT"/kernel_ab/after/"$suite"/vs_cudnn*.json --out "$OUT/kernel_ab/$suite.md"
        done ;;
    choice_ab)   # the untuned op (no database) through user_suite.py before and after $CHOICE_AB_PATCH (a change of the
                 # untuned choice, reverted after), then vs_cudnn.py on the same entries with $CHOICE_AB_FAMILIES' model-top
                 # configs: the two choices timed through the op by the profiler, and every family by events, in one run
        patch_file=${CHOICE_AB_PATCH:-benchmarks/ab/simt_untuned_float32_only.patch}
        only=${CHOICE_AB_ONLY:-lenet_caffe_conv1_b64 enet_initial_b4 mobilenetv2_stem_b64}
        cls=${CHOICE_AB_CLASS:-tf32}
        for side in before after; do
            if [ $side = after ] && ! patch -p1 --forward < "$patch_file"; then echo "choice_ab: $patch_file does not apply"; break; fi
            # shellcheck disable=SC2086  # the entry names split on whitespace
            timeout "${CHOICE_AB_S:-200}" python3 benchmarks/user_suite.py --class "$cls" --no-compile \
                --suite "${CHOICE_AB_SUITE:-benchmarks/suites/wide.json}" --only $only \
                --db "sqlite:////tmp/convtune-choice-ab-$side.db" --out "$OUT/choice_ab_$side" \
                > "$OUT/choice_ab_$side.log" 2>&1 || echo "choice_ab: $side failed"
            grep -A8 "geomean speedup" "$OUT/choice_ab_$side/user_suite.md" 2>/dev/null | head -12
        done
        patch -p1 -R --forward < "$patch_file" > /dev/null 2>&1
        case $cls in tf32) math=(--math tf32) ;; bfloat16 | float16) math=(--dtype "$cls") ;; *) math=() ;; esac
        # shellcheck disable=SC2086
        timeout "${CHOICE_AB_S:-200}" python3 benchmarks/vs_cudnn.py "${math[@]}" --top "${CHOICE_AB_TOP:-8}" --buckets 0 \
            --suite "${CHOICE_AB_SUITE:-benchmarks/suites/wide.json}" --only $only --out "$OUT/choice_ab_families" \
            --families ${CHOICE_AB_FAMILIES:-igemm_simt igemm igemm_wgmma direct} > "$OUT/choice_ab_families.log" 2>&1
        tail -12 "$OUT/choice_ab_families.log" ;;
    fwd_split)
        python3 benchmarks/forward_host_split.py --out "$OUT/fwd_split" 2>&1 | tee "$OUT/fwd_split.log" | tail -50 ;;
    backward_split)
        python3 benchmarks/backward_host_split.py --out "$OUT/backward_split" 2>&1 | tee "$OUT/backward_split.log" | tail -60 ;;
    residue)
        python3 benchmarks/profiler_residue.py --out "$OUT/profiler_residue" --class "${RESIDUE_CLASS:-bfloat16}" \
            --configs-from "${RESIDUE_TABLE:-tests/data/replay_h200_bf16.json.gz}" \
            --only ${RESIDUE_ENTRIES:-alexnet_conv1_b1 zfnet_conv1_b1 yolov2_voc_head_b1 resnet50_conv1_b1 yolov3_head_52_b8} \
            2>&1 | tee "$OUT/profiler_residue.log" | tail -12 ;;
    dw_suite)
        python3 benchmarks/dw_user_suite.py --out "$OUT/dw_suite" ${DW_SUITE_ARGS:-} 2>&1 | tee "$OUT/dw_suite.log" \
            | tail -40 ;;
    user_suite)
        python3 benchmarks/user_suite.py --out "$OUT/user_suite" ${USER_SUITE_DB:+--db "$USER_SUITE_DB"} \
            ${USER_SUITE_TUNE_S:+--tune-budget-s "$USER_SUITE_TUNE_S"} ${USER_SUITE_ARGS:-} 2>&1 \
            | tee "$OUT/user_suite.log" | tail -25 ;;
    models)
        models=${MODELS:-resnet50 vgg16 mobilenet_v2}
        if [ -n "${MODEL_PRECOMPILE:-}" ]; then   # the tuner's first $MODEL_PRECOMPILE trials per layer, compiled here
            python3 benchmarks/model_problems.py --models $models --math "${MODEL_MATH:-ieee}" > "$OUT/model_problems.txt" \
                && python3 benchmarks/precompile_cubins.py --out "$CONVTUNE_CUBIN_DIR" --machine "${MODEL_MACHINE:-h100}" \
                    --warm-start "$MODEL_PRECOMPILE" --problems "$OUT/model_problems.txt" 2>&1 | tail -3
        fi
        python3 benchmarks/model_inference.py --models $models --budget-s "${MODEL_BUDGET_S:-150}" \
            --budget-trials "${MODEL_BUDGET_TRIALS:-6}" --db "${MODEL_DB:-sqlite:////tmp/convtune-models.db}" \
            --math "${MODEL_MATH:-ieee}" ${MODEL_FUSE:+--fuse} \
            --out "$OUT/models_${models// /_}" 2>&1 | tee "$OUT/models_${models// /_}.log" | tail -40 ;;
    eager_profile)
        for spec in ${EAGER_PROFILE_MODELS:-vgg16:1 resnet50:32 mobilenet_v2:32}; do
            python3 benchmarks/eager_profile.py --model "${spec%%:*}" --batch "${spec##*:}" --calls 30 --top 25 \
                ${EAGER_PROFILE_ARGS:-}
        done 2>&1 | tee "$OUT/eager_profile.log" | grep -E "host .* ms / forward" ;;
    *) echo "unknown step $step"; exit 2 ;;
    esac
done
