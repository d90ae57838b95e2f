// Shared definitions of the causal depthwise 1-D kernels (layout (B, C, L), taps w (C, K); fp32, and for the
// fast variant fp16/bf16 storage with fp32 sums: storage.cuh).
//
//   fwd   y[b,c,t]  = Σ_{j<K, t−j≥0}  w[c,j] · x[b,c,t−j]
//   dgrad dx[b,c,s] = Σ_{j<K, s+j<L}  w[c,j] · dy[b,c,s+j]
//   wgrad dw[c,j]   = Σ_b Σ_{t=j}^{L−1} dy[b,c,t] · x[b,c,t−j]
//
// Rows are (b, c) pairs, row = b·C + c, each L contiguous floats. Taps j ≥ L never touch data, so every
// kernel works with KE = min(K, L) taps; w keeps its row stride K. Weight gradients leave either
// per-slice partials, laid out [P, C, KE] (slice p, channel c: slot p·C + c) and summed in slice order by
// dw_reduce (bitwise repeatable), or atomic adds into a zeroed dw.
#pragma once

namespace convtune {
namespace dw {

constexpr int PATH_FWD = 0;
constexpr int PATH_DGRAD = 1;
constexpr int PATH_WGRAD = 2;

constexpr int round_up4(int n) { return (n + 3) / 4 * 4; }

}  // namespace dw
}  // namespace convtune
