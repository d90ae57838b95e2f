// 2-D depthwise weight gradient, NCHW fp32, any R×S, stride SH×SW, any padding (dilation 1):
//   dw[c,r,s] = Σ_{n,p,q} dy[n,c,p,q] · x[n, c, p·SH − PH + r, q·SW − PW + s]        dw: (C, 1, R, S)
//
// Block b = (channel c, batch group ng, band bd), band fastest then ng: planes n·C + c for
// n = ng·PB … ng·PB + PB − 1 (one channel: every product of the block adds into the same R·S sums) × dy rows
// [bd·TH, bd·TH + TH) × every column. Staging with cp.async (zero fill by the copies): x as in the forward
// kernel ([PB][IH][PITCH], IH = (TH−1)·SH + R, image column w at shared column w + OFF) and the dy band
// ([PB][TH][DPITCH] from the next 16-byte boundary, dy column q at shared column q).
// Compute: item = (plane, VH dy rows, VW dy columns): the VH·VW dy values go to registers, then each of the
// (VH−1)·SH + R x rows' windows is read once and every (dy value, tap) pair that meets it is accumulated:
//   sums[r·S + s] += dy[v][u] · x_window[u·SW + s]      (r = input row − v·SH, compile-time)
// The R·S sums of a thread are added over the warp (xor shuffles; lane 0's sums are used), then over the
// warps in warp order through shared memory: one partial per block, slot (ng·nbands + bd)·C + c of
// [P, C, R·S] (summed by dw_reduce in slot order: bitwise repeatable), or R·S atomic adds into dw[c].
// Storage type T (storage.cuh): float, or half16 / bfloat16 — x and dy are staged as stored (copies of VEC /
// DVEC elements: 16 bytes for float, 8 for 16-bit types, a single 16-bit element by a plain load) and read as
// floats; every sum is fp32 and `out` is fp32 (partials, an fp32 dw, or the fp32 atomic workspace of 16-bit
// storage that dw_reduce converts). The block reduction reuses the staging memory as floats.
#include "common.cuh"
#include "storage.cuh"

namespace convtune {
namespace dw {

template <int R, int S, int SH, int SW, int PH, int PW, int H, int W, int P, int Q, int TH, int VH, int VW, int PB,
          int THREADS, int PITCH, int OFF, int VEC, int DPITCH, int DVEC, bool ATOMIC, class T = float>
__device__ __forceinline__ void dw2d_wgrad_body(const T* __restrict__ x, const T* __restrict__ dy,
                                                float* __restrict__ out, int N, int C, int nbands, int nng) {
  constexpr int IH = (TH - 1) * SH + R;
  constexpr int NQ = (Q + VW - 1) / VW, NH = TH / VH;
  constexpr int ITEMS = PB * NH * NQ;
  constexpr int WIN = (VW - 1) * SW + S;
  constexpr int DELTA = OFF - PW;
  constexpr bool F4 = (VW * SW) % 4 == 0 && PITCH % 4 == 0;
  constexpr int D4 = F4 ? DELTA % 4 : 0;
  constexpr int NCH = (D4 + WIN + 3) / 4;
  constexpr int ROWS_IN = (VH - 1) * SH + R;
  constexpr bool DF4 = VW % 4 == 0 && DPITCH % 4 == 0;
  constexpr int RS = R * S, WARPS = THREADS / 32;
  static_assert(TH % VH == 0, "TH must be a multiple of VH");
  static_assert(VEC == 1 || (VEC == 4 && W % 4 == 0 && OFF % 4 == 0 && PITCH % 4 == 0), "16-byte x copies");
  static_assert(DVEC == 1 || (DVEC == 4 && Q % 4 == 0 && DPITCH % 4 == 0), "16-byte dy copies");
  static_assert(OFF >= PW && PITCH >= OFF + W && DPITCH >= NQ * VW, "shared rows cover the reads");
  extern __shared__ __align__(16) unsigned char dw_smem[];
  constexpr int XELEMS = (PB * IH * PITCH + 3) / 4 * 4;  // the dy band starts 4-element (vector) aligned
  T* xs = reinterpret_cast<T*>(dw_smem);
  T* ds = xs + XELEMS;
  const int bd = blockIdx.x % nbands, rest = blockIdx.x / nbands;
  const int ng = rest % nng, c = rest / nng;
  const int pb0 = bd * TH, h0 = pb0 * SH - PH;

  constexpr int CPR = PITCH / VEC;
  for (int i = threadIdx.x; i < PB * IH * CPR; i += THREADS) {
    const int prow = i / CPR, k = i - (i / CPR) * CPR;
    const int pl = prow / IH, ir = prow - (prow / IH) * IH;
    const int n = ng * PB + pl, h = h0 + ir, col = k * VEC - OFF;
    const bool ok = n < N && h >= 0 && h < H && col >= 0 && col < W;
    const T* src = ok ? x + ((static_cast<long long>(n) * C + c) * H + h) * W + col : x;
    cp_async_elems<VEC>(xs + prow * PITCH + k * VEC, src, ok);
  }
  constexpr int DPR = DPITCH / DVEC;
  for (int i = threadIdx.x; i < PB * TH * DPR; i += THREADS) {
    const int prow = i / DPR, k = i - (i / DPR) * DPR;
    const int pl = prow / TH, ir = prow - (prow / TH) * TH;
    const int n = ng * PB + pl, p = pb0 + ir, col = k * DVEC;
    const bool ok = n < N && p < P && col < Q;
    const T* src = ok ? dy + ((static_cast<long long>(n) * C + c) * P + p) * Q + col : dy;
    cp_async_elems<DVEC>(ds + prow * DPITCH + k * DVEC, src, ok);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  float sums[RS];
#pragma unroll
  for (int k = 0; k < RS; ++k) sums[k] = 0.f;
  for (int it = threadIdx.x; it < ITEMS; it += THREADS) {
    const int pl = it / (NH * NQ), rem = it - (it / (NH * NQ)) * (NH * NQ);
    const int rg = rem / NQ, qg = rem - (rem / NQ) * NQ;
    if (ng * PB + pl >= N || pb0 + rg * VH >= P) continue;
    float d[VH][VW];
#pragma unroll
    for (int v = 0; v < VH; ++v) {
      const T* dr = ds + (pl * TH + rg * VH + v) * DPITCH + qg * VW;
      if (DF4) {
#pragma unroll
        for (int u = 0; u < VW; u += 4) {
          float f[4];
          load4_f32(dr + u, f);
          d[v][u] = f[0], d[v][u + 1] = f[1], d[v][u + 2] = f[2], d[v][u + 3] = f[3];
        }
      } else {
#pragma unroll
        for (int u = 0; u < VW; ++u) d[v][u] = to_f32(dr[u]);
      }
    }
    const T* base = xs + (pl * IH + rg * VH * SH) * PITCH + qg * VW * SW + DELTA - D4;
#pragma unroll
    for (int ir = 0; ir < ROWS_IN; ++ir) {
      float win[F4 ? 4 * NCH : WIN];
      if (F4) {
#pragma unroll
        for (int k = 0; k < NCH; ++k) {
          float f[4];
          load4_f32(base + ir * PITCH + 4 * k, f);
          win[4 * k] = f[0], win[4 * k + 1] = f[1], win[4 * k + 2] = f[2], win[4 * k + 3] = f[3];
        }
      } else {
#pragma unroll
        for (int k = 0; k < WIN; ++k) win[k] = to_f32(base[ir * PITCH + k]);
      }
#pragma unroll
      for (int v = 0; v < VH; ++v) {
        const int r = ir - v * SH;
        if (r < 0 || r >= R) continue;
#pragma unroll
        for (int s = 0; s < S; ++s) {
#pragma unroll
          for (int u = 0; u < VW; ++u) sums[r * S + s] = fmaf(d[v][u], win[D4 + u * SW + s], sums[r * S + s]);
        }
      }
    }
  }
  // block reduction: warp (xor butterfly, lane 0's value), then warps in order
#pragma unroll
  for (int k = 0; k < RS; ++k) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) sums[k] += __shfl_xor_sync(0xffffffffu, sums[k], off);
  }
  __syncthreads();  // every staged value is read: reuse the memory
  float* red = reinterpret_cast<float*>(dw_smem);  // [WARPS][RS]: shared memory fits staging or reduction
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
#pragma unroll
    for (int k = 0; k < RS; ++k) red[warp * RS + k] = sums[k];
  }
  __syncthreads();
  for (int k = threadIdx.x; k < RS; k += THREADS) {
    float t = 0.f;
#pragma unroll
    for (int wp = 0; wp < WARPS; ++wp) t += red[wp * RS + k];
    if (ATOMIC) {
      atomicAdd(out + c * RS + k, t);
    } else {
      out[((ng * nbands + bd) * C + c) * RS + k] = t;
    }
  }
}

}  // namespace dw
}  // namespace convtune
