"""The pointwise (1×1) forward family: one GEMM over every output pixel of every image."""
