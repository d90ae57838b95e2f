// Causal depthwise 1-D, the two "one thread per output" variants of the S4ConvD study.
//
// naive     (COALESCED=false): consecutive threads take consecutive batch indices b, so a warp's loads are
//           C·L floats apart (one sector each); every tap reads x (or dy) and w from global memory.
// coalesced (COALESCED=true):  consecutive threads take consecutive t (wgrad: consecutive taps j), so a
//           warp's loads are contiguous; still no on-chip reuse beyond what L1 happens to keep.
//
// wgrad: one thread per (b, c, j < KE) sums Σ_t dy[b,c,t]·x[b,c,t−j] and leaves it as partial slice
// p = b (deterministic) or adds it atomically into dw[c, j].
#include "depthwise/dw1d_common.cuh"

namespace convtune {
namespace dw {

template <bool COALESCED>
__device__ __forceinline__ void output_coords(int idx, int B, int C, int L, int& b, int& c, int& t) {
  if (COALESCED) {
    t = idx % L;
    const int r = idx / L;
    c = r % C;
    b = r / C;
  } else {  // batch fastest, then time, then channel
    b = idx % B;
    const int r = idx / B;
    t = r % L;
    c = r / L;
  }
}

template <bool COALESCED, int PATH>
__device__ __forceinline__ void simple_body(const float* __restrict__ a, const float* __restrict__ w,
                                            float* __restrict__ out, int B, int C, int L, int K, int KE) {
  const int total = B * C * L;
  for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
    int b, c, t;
    output_coords<COALESCED>(idx, B, C, L, b, c, t);
    const float* row = a + (b * C + c) * L;
    const float* wr = w + c * K;
    float acc = 0.f;
    if (PATH == PATH_FWD) {
      const int jmax = min(KE - 1, t);  // causal: x[t − j] with t − j < 0 is zero
      for (int j = 0; j <= jmax; ++j) acc = fmaf(wr[j], row[t - j], acc);
    } else {
      const int jmax = min(KE - 1, L - 1 - t);  // dy[s + j] with s + j ≥ L is zero
      for (int j = 0; j <= jmax; ++j) acc = fmaf(wr[j], row[t + j], acc);
    }
    out[(b * C + c) * L + t] = acc;
  }
}

template <bool COALESCED, bool ATOMIC>
__device__ __forceinline__ void simple_wgrad_body(const float* __restrict__ x, const float* __restrict__ dy,
                                                  float* __restrict__ out, int B, int C, int L, int K, int KE) {
  const int total = B * C * KE;
  for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
    int b, c, j;
    if (COALESCED) {  // taps fastest: lanes read x[t − j] at consecutive addresses, dy[t] is a broadcast
      j = idx % KE;
      const int r = idx / KE;
      c = r % C;
      b = r / C;
    } else {
      b = idx % B;
      const int r = idx / B;
      j = r % KE;
      c = r / KE;
    }
    const float* xr = x + (b * C + c) * L;
    const float* dr = dy + (b * C + c) * L;
    float acc = 0.f;
    for (int t = j; t < L; ++t) acc = fmaf(dr[t], xr[t - j], acc);
    if (ATOMIC) {
      atomicAdd(out + c * K + j, acc);
    } else {
      out[(b * C + c) * KE + j] = acc;  // slice p = b of [B, C, KE]
    }
  }
}

}  // namespace dw
}  // namespace convtune
