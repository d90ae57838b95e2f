// Causal depthwise 1-D, warp-tiled variant: each warp owns whole (b, c) rows and works without block-wide
// barriers (only __syncwarp), through a private slice of shared memory.
//
// fwd/dgrad: warp w of block k takes rows k·WARPS + w, then += gridDim.x·WARPS. Per row it keeps w[c, :KE]
// in its slice (reloaded only when the row's channel changes) and walks the row in chunks of CH = 32·V
// outputs: the lanes stage the chunk plus its KE−1 halo (coalesced, zero-filled outside [0, L)), then lane
// l computes outputs l0 + v·32 + l (v < V: consecutive lanes read consecutive words, no bank conflicts;
// w[j] is a broadcast). Slice: KE + CH + KE − 1 floats per warp.
//
// wgrad: a block owns channel c and batch rows [bg·RB, bg·RB + RB); warp w takes rows bg·RB + w + k·WARPS.
// Lane l owns taps j = l + 32·i (i < JT, KE ≤ 32·JT) and accumulates over its warp's rows in registers;
// the warps' sums are added in warp order through shared memory, then one partial (slice p = bg) or one
// atomic add per (block, j). Slice: x chunk with halo (CH + KE − 1) + dy chunk (CH) per warp.
#include "depthwise/dw1d_common.cuh"

namespace convtune {
namespace dw {

template <int PATH, int WARPS, int V>
__device__ __forceinline__ void warp_body(const float* __restrict__ a, const float* __restrict__ w,
                                          float* __restrict__ out, int NR, int C, int L, int K, int KE) {
  constexpr int CH = 32 * V;
  extern __shared__ float smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int H = KE - 1;
  float* ws = smem + warp * (KE + CH + H);
  float* xs = ws + KE;
  int cached_c = -1;
  for (int row = blockIdx.x * WARPS + warp; row < NR; row += gridDim.x * WARPS) {
    const int c = row % C;
    const float* src = a + row * L;
    if (c != cached_c) {  // warp-uniform
      __syncwarp();
      for (int j = lane; j < KE; j += 32) ws[j] = w[c * K + j];
      cached_c = c;
    }
    for (int l0 = 0; l0 < L; l0 += CH) {
      __syncwarp();
      for (int k = lane; k < CH + H; k += 32) {
        const int p = (PATH == PATH_FWD) ? l0 - H + k : l0 + k;
        xs[k] = (p >= 0 && p < L) ? src[p] : 0.f;
      }
      __syncwarp();
      float acc[V];
#pragma unroll
      for (int v = 0; v < V; ++v) acc[v] = 0.f;
      // taps beyond the chunk's last output (fwd) or beyond the row's end (dgrad) only meet zeros
      const int jmax = (PATH == PATH_FWD) ? min(KE - 1, l0 + CH - 1) : min(KE - 1, L - 1 - l0);
      for (int j = 0; j <= jmax; ++j) {
        const float wj = ws[j];
#pragma unroll
        for (int v = 0; v < V; ++v) {
          const int k = (PATH == PATH_FWD) ? v * 32 + lane + H - j : v * 32 + lane + j;
          acc[v] = fmaf(wj, xs[k], acc[v]);
        }
      }
#pragma unroll
      for (int v = 0; v < V; ++v) {
        const int t = l0 + v * 32 + lane;
        if (t < L) out[row * L + t] = acc[v];
      }
    }
  }
}

template <int WARPS, int V, int JT, bool ATOMIC>
__device__ __forceinline__ void warp_wgrad_body(const float* __restrict__ x, const float* __restrict__ dy,
                                                float* __restrict__ out, int B, int C, int L, int K, int KE,
                                                int RB, int nbg) {
  constexpr int CH = 32 * V;
  extern __shared__ float smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int H = KE - 1;
  const int bg = blockIdx.x % nbg, c = blockIdx.x / nbg;
  float* xs = smem + warp * (2 * CH + H);
  float* ds = xs + CH + H;
  float acc[JT];
#pragma unroll
  for (int i = 0; i < JT; ++i) acc[i] = 0.f;
  const int b_end = min(B, (bg + 1) * RB);
  for (int b = bg * RB + warp; b < b_end; b += WARPS) {
    const float* xr = x + (b * C + c) * L;
    const float* dr = dy + (b * C + c) * L;
    for (int l0 = 0; l0 < L; l0 += CH) {
      __syncwarp();
      for (int k = lane; k < CH + H; k += 32) {
        const int p = l0 - H + k;
        xs[k] = (p >= 0 && p < L) ? xr[p] : 0.f;
      }
      for (int k = lane; k < CH; k += 32) ds[k] = (l0 + k < L) ? dr[l0 + k] : 0.f;
      __syncwarp();
      const int tn = min(CH, L - l0);
      for (int t = 0; t < tn; ++t) {
        const float d = ds[t];  // broadcast
#pragma unroll
        for (int i = 0; i < JT; ++i) {
          const int j = lane + 32 * i;
          if (j < KE) acc[i] = fmaf(d, xs[t + H - j], acc[i]);
        }
      }
    }
  }
  __syncthreads();  // every warp is done with its slice: reuse shared memory for the sums
  float* red = smem;  // [WARPS][KE]
#pragma unroll
  for (int i = 0; i < JT; ++i) {
    const int j = lane + 32 * i;
    if (j < KE) red[warp * KE + j] = acc[i];
  }
  __syncthreads();
  for (int j = threadIdx.x; j < KE; j += WARPS * 32) {
    float s = 0.f;
    for (int r = 0; r < WARPS; ++r) s += red[r * KE + j];
    if (ATOMIC) {
      atomicAdd(out + c * K + j, s);
    } else {
      out[(bg * C + c) * KE + j] = s;
    }
  }
}

}  // namespace dw
}  // namespace convtune
