// Causal depthwise 1-D, warp-tiled variant: warps cooperate on whole (b, c) rows without block-wide barriers.
//
// fwd/dgrad, register design (warp_reg_body; taps KE <= 64): a warp holds RPW = 32/G rows at once, G lanes
// per row (consecutive rows: the warp's loads cover one contiguous stretch of memory). A row is walked in
// segments of SEG = G·V outputs; lane g of a row group owns the V consecutive outputs [s0 + g·V, s0 + g·V + V)
// and loads exactly those V inputs (16-byte loads when VEC4), so every input is read from global memory
// once. Its KE taps stay in registers for the whole kernel (the persistent grid keeps each lane's channel).
// The inputs of the lanes to the left (lag d lanes, d = 0..DMAX) arrive by __shfl_sync within the row
// group; lanes left of the segment start take the previous segment's values, which each lane keeps in
// registers (MULTI: rows longer than one segment; needs KE <= SEG + 1) — the sender picks cur or prev, so
// one shuffle moves one value. With j = d·V + v − u compile-time, every multiply-add has a register tap:
//     acc[v] += w[j] · x[s0 + (g − d)·V + u]
// The next item's inputs are loaded before the current item is computed (software pipelining).
// dgrad is the same causal sum in reversed time τ' = L−1−τ: loads and stores address L−1−τ' (a float4 at
// the mirrored address, its four values taken in reverse order).
//
// fwd/dgrad, shared-memory design (warp_body; KE > 64, lanes_per_row = 32): warp w of block k takes rows
// k·WARPS + w, then += gridDim.x·WARPS. Per row it keeps w[c, :KE] in its slice (reloaded only when the
// row's channel changes) and walks the row in chunks of CH = 32·V outputs: the lanes stage the chunk plus
// its KE−1 halo (coalesced, zero-filled outside [0, L)), then lane l computes outputs l0 + v·32 + l (v < V:
// consecutive lanes read consecutive words, no bank conflicts; w[j] is a broadcast). Slice: KE + CH + KE − 1
// floats per warp.
//
// wgrad, register design (design = 2): see warp_reg_wgrad_body below.
// wgrad, taps design (design = 1): a block owns channel c and batch rows [bg·RB, bg·RB + RB); warp w takes rows bg·RB + w + k·WARPS.
// Lane l owns taps j = l + 32·i (i < JT, KE ≤ 32·JT) and accumulates over its warp's rows in registers;
// the warps' sums are added in warp order through shared memory, then one partial (slice p = bg) or one
// atomic add per (block, j). Slice: x chunk with halo (CH + KE − 1) + dy chunk (CH) per warp.
#include "depthwise/dw1d_common.cuh"

namespace convtune {
namespace dw {

// V values of a lane: time t0 + u (u < V) of a row (reversed time when REV), zero outside [0, L).
template <int V, bool VEC4, bool REV>
__device__ __forceinline__ void warp_load(float (&v)[V], const float* __restrict__ src, int t0, int L, bool ok) {
  if (VEC4) {
#pragma unroll
    for (int q = 0; q < V / 4; ++q) {
      const int t = t0 + 4 * q;  // L % 4 == 0: a chunk is wholly inside or outside
      float4 f = make_float4(0.f, 0.f, 0.f, 0.f);
      if (ok && t < L) f = __ldg(reinterpret_cast<const float4*>(src + (REV ? L - 4 - t : t)));
      v[4 * q + 0] = REV ? f.w : f.x;
      v[4 * q + 1] = REV ? f.z : f.y;
      v[4 * q + 2] = REV ? f.y : f.z;
      v[4 * q + 3] = REV ? f.x : f.w;
    }
  } else {
#pragma unroll
    for (int u = 0; u < V; ++u) {
      const int t = t0 + u;
      v[u] = (ok && t < L) ? __ldg(src + (REV ? L - 1 - t : t)) : 0.f;
    }
  }
}

template <int V, bool VEC4, bool REV>
__device__ __forceinline__ void warp_store(const float (&v)[V], float* __restrict__ dst, int t0, int L, bool ok) {
  if (!ok) return;
  if (VEC4) {
#pragma unroll
    for (int q = 0; q < V / 4; ++q) {
      const int t = t0 + 4 * q;
      if (t < L) {
        const float4 f = REV ? make_float4(v[4 * q + 3], v[4 * q + 2], v[4 * q + 1], v[4 * q])
                             : make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
        *reinterpret_cast<float4*>(dst + (REV ? L - 4 - t : t)) = f;
      }
    }
  } else {
#pragma unroll
    for (int u = 0; u < V; ++u) {
      const int t = t0 + u;
      if (t < L) dst[REV ? L - 1 - t : t] = v[u];
    }
  }
}

template <int PATH, int KE, int G, int V, int WARPS, bool VEC4, bool MULTI>
__device__ __forceinline__ void warp_reg_body(const float* __restrict__ a, const float* __restrict__ w,
                                              float* __restrict__ out, int NR, int C, int L, int K, int nseg) {
  constexpr int RPW = 32 / G, RPB = WARPS * RPW;
  constexpr bool REV = PATH == PATH_DGRAD;
  constexpr int DFULL = (KE + V - 2) / V;                      // largest lag (in lanes) that meets a tap
  constexpr int DMAX = MULTI ? DFULL : (DFULL < G - 1 ? DFULL : G - 1);
  static_assert(G >= 1 && G <= 32 && (G & (G - 1)) == 0, "G: a power of two <= 32");
  static_assert(!MULTI || DFULL <= G, "one segment of history: KE <= G*V + 1");
  static_assert(!VEC4 || V % 4 == 0, "VEC4 needs V % 4 == 0");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane & (G - 1), rsub = lane / G;
  const int base0 = blockIdx.x * RPB + warp * RPW;  // warp-uniform
  const int stride = gridDim.x * RPB;
  const int row0 = base0 + rsub;
  float wr[KE];
  {
    const int c = row0 % C;  // the lane's channel for the whole kernel (stride % C == 0 or a single pass)
#pragma unroll
    for (int j = 0; j < KE; ++j) wr[j] = row0 < NR ? __ldg(w + c * K + j) : 0.f;
  }
  const int nbase = base0 < NR ? (NR - 1 - base0) / stride + 1 : 0;
  const int items = nbase * nseg;  // item k: row base0 + (k / nseg)·stride + rsub, segment k % nseg
  float cur[V], nxt[V], prev[V];
#pragma unroll
  for (int u = 0; u < V; ++u) prev[u] = nxt[u] = 0.f;
  if (items > 0) warp_load<V, VEC4, REV>(cur, a + row0 * L, g * V, L, row0 < NR);
  for (int k = 0; k < items; ++k) {
    const int kr = k / nseg, sg = k - kr * nseg;
    const int row = row0 + kr * stride;
    const int t0 = sg * (G * V) + g * V;
    if (k + 1 < items) {
      const int k1r = (k + 1) / nseg, sg1 = (k + 1) - k1r * nseg;
      const int row1 = row0 + k1r * stride;
      warp_load<V, VEC4, REV>(nxt, a + row1 * L, sg1 * (G * V) + g * V, L, row1 < NR);
    }
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = 0.f;
#pragma unroll
    for (int d = 0; d <= DMAX; ++d) {
      float rv[V];
#pragma unroll
      for (int u = 0; u < V; ++u) {
        if (d == 0) {
          rv[u] = cur[u];
        } else if (MULTI && d == G) {
          rv[u] = prev[u];  // the same lane, one segment back
        } else {
          const float send = (MULTI && g + d >= G) ? prev[u] : cur[u];
          const float r = __shfl_sync(0xffffffffu, send, (g - d) & (G - 1), G);
          rv[u] = (MULTI || g >= d) ? r : 0.f;
        }
      }
#pragma unroll
      for (int u = 0; u < V; ++u) {
#pragma unroll
        for (int v = 0; v < V; ++v) {
          const int j = d * V + v - u;
          if (j >= 0 && j < KE) acc[v] = fmaf(wr[j], rv[u], acc[v]);
        }
      }
    }
    warp_store<V, VEC4, REV>(acc, out + row * L, t0, L, row < NR);
#pragma unroll
    for (int u = 0; u < V; ++u) {
      if (MULTI) prev[u] = sg + 1 < nseg ? cur[u] : 0.f;
      cur[u] = nxt[u];
    }
  }
}

// wgrad, register design (warp_reg_wgrad_body; KE <= 64): the fwd register design's lanes, segments and x
// shuffles, with the lane's V dy values in registers instead of taps and KE sums per lane:
//     sums[j] += dy[s0 + g·V + v] · x[s0 + (g − d)·V + u]        (j = d·V + v − u, compile-time)
// At the end the G lanes of a row group add their sums (xor shuffles within the group), and lane g = 0
// leaves them in partial slot row0 (= p·C + c) of [P, C, KE] or adds them atomically into dw[c, :KE].
template <int KE, int G, int V, int WARPS, bool VEC4, bool MULTI, bool ATOMIC>
__device__ __forceinline__ void warp_reg_wgrad_body(const float* __restrict__ x, const float* __restrict__ dy,
                                                    float* __restrict__ out, int NR, int C, int L, int K,
                                                    int nseg) {
  constexpr int RPW = 32 / G, RPB = WARPS * RPW;
  constexpr int DFULL = (KE + V - 2) / V;
  constexpr int DMAX = MULTI ? DFULL : (DFULL < G - 1 ? DFULL : G - 1);
  static_assert(G >= 1 && G <= 32 && (G & (G - 1)) == 0, "G: a power of two <= 32");
  static_assert(!MULTI || DFULL <= G, "one segment of history: KE <= G*V + 1");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane & (G - 1), rsub = lane / G;
  const int base0 = blockIdx.x * RPB + warp * RPW;
  const int stride = gridDim.x * RPB;
  const int row0 = base0 + rsub;
  float sums[KE];
#pragma unroll
  for (int j = 0; j < KE; ++j) sums[j] = 0.f;
  const int nbase = base0 < NR ? (NR - 1 - base0) / stride + 1 : 0;
  const int items = nbase * nseg;
  float cur[V], nxt[V], prev[V], dc[V], dn[V];
#pragma unroll
  for (int u = 0; u < V; ++u) prev[u] = nxt[u] = dn[u] = 0.f;
  if (items > 0) {
    warp_load<V, VEC4, false>(cur, x + row0 * L, g * V, L, row0 < NR);
    warp_load<V, VEC4, false>(dc, dy + row0 * L, g * V, L, row0 < NR);
  }
  for (int k = 0; k < items; ++k) {
    const int sg = k - (k / nseg) * nseg;
    if (k + 1 < items) {
      const int k1r = (k + 1) / nseg, sg1 = (k + 1) - k1r * nseg;
      const int row1 = row0 + k1r * stride;
      warp_load<V, VEC4, false>(nxt, x + row1 * L, sg1 * (G * V) + g * V, L, row1 < NR);
      warp_load<V, VEC4, false>(dn, dy + row1 * L, sg1 * (G * V) + g * V, L, row1 < NR);
    }
#pragma unroll
    for (int d = 0; d <= DMAX; ++d) {
      float rv[V];
#pragma unroll
      for (int u = 0; u < V; ++u) {
        if (d == 0) {
          rv[u] = cur[u];
        } else if (MULTI && d == G) {
          rv[u] = prev[u];
        } else {
          const float send = (MULTI && g + d >= G) ? prev[u] : cur[u];
          const float r = __shfl_sync(0xffffffffu, send, (g - d) & (G - 1), G);
          rv[u] = (MULTI || g >= d) ? r : 0.f;
        }
      }
#pragma unroll
      for (int u = 0; u < V; ++u) {
#pragma unroll
        for (int v = 0; v < V; ++v) {
          const int j = d * V + v - u;
          if (j >= 0 && j < KE) sums[j] = fmaf(dc[v], rv[u], sums[j]);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < V; ++u) {
      if (MULTI) prev[u] = sg + 1 < nseg ? cur[u] : 0.f;
      cur[u] = nxt[u];
      dc[u] = dn[u];
    }
  }
  if (G > 1) {  // the row group's lanes add their sums: a fixed butterfly, lane 0's result is used
#pragma unroll
    for (int j = 0; j < KE; ++j) {
#pragma unroll
      for (int off = G / 2; off > 0; off >>= 1) sums[j] += __shfl_xor_sync(0xffffffffu, sums[j], off, G);
    }
  }
  if (g == 0) {
    if (ATOMIC) {
      if (row0 < NR) {
        const int c = row0 % C;
#pragma unroll
        for (int j = 0; j < KE; ++j) atomicAdd(out + c * K + j, sums[j]);
      }
    } else {  // slot row0 = p·C + c; idle slots write their zeros
#pragma unroll
      for (int j = 0; j < KE; ++j) out[row0 * KE + j] = sums[j];
    }
  }
}

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
