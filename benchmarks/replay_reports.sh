# The committed vs_cudnn reports each card's tensor-core replay tables are made from (benchmarks/make_replay.py, later
# reports winning the clashes), one list per preset and class; sourced by tma_1x1_round.sh and gpu_check.sh.
# tests/data/replay_h100_{tf32,bf16}.json.gz: the H100 list, then its TMA 1x1 run, then the n96 run.
# shellcheck shell=bash disable=SC2034  # the lists are read by the scripts that source this file
R=benchmarks/results/igemm_wgmma_h200
H100_BF16_REPORTS="$R/six_families_h100/half_wide/vs_cudnn_bf16.json $R/six_families_h100/half_public/vs_cudnn_bf16.json
                   benchmarks/results/sliced_h100/run1/bf16/vs_cudnn_bf16.json"
H100_TF32_REPORTS="$R/resident_1x1_tf32/v1/vs_cudnn_tf32.json $R/six_families_h100/tf32_wide/vs_cudnn_tf32.json
                   $R/six_families_h100/tf32_public/vs_cudnn_tf32.json"
H100_TMA_1X1_BF16="$R/tma_1x1_h100/conv1x1_bf16/vs_cudnn_bf16.json"
H100_TMA_1X1_TF32="$R/tma_1x1_tf32_h100/conv1x1_tf32/vs_cudnn_tf32.json"
H200_BF16_REPORTS="$R/six_families_h200/half_public/vs_cudnn_bf16.json $R/six_families_h200/half_wide/vs_cudnn_bf16.json
                   $R/six_families_h200/conv1x1_bf16/vs_cudnn_bf16.json"
H200_TF32_REPORTS="$R/six_families_h200/tf32_public/vs_cudnn_tf32.json $R/six_families_h200/tf32_wide/vs_cudnn_tf32.json
                   $R/six_families_h200/conv1x1_tf32/vs_cudnn_tf32.json"
