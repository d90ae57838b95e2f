// 2-D depthwise input gradient, NCHW fp32, any R×S, stride SH×SW, any padding (dilation 1):
//   dx[n,c,h,w] = Σ_{r<R, s<S} w[c,r,s] · dy[n, c, (h + PH − r)/SH, (w + PW − s)/SW]
// over the (r, s) whose numerators are multiples of the strides and whose quotients fall inside P×Q.
// Planes are (n, c) pairs, plane = n·C + c; dy plane P·Q, dx plane H·W.
//
// Block b = (plane group pg, band bd), band fastest: planes pg·PB … + PB − 1, dx rows [bd·TH, bd·TH + TH)
// (TH a multiple of VH, VH a multiple of SH, VW a multiple of SW) × every column. Staging: the IHD dy rows
// the band needs, dy row bd·TH/SH + E0 + i (i < IHD), full width, into shared memory [PB][IHD][PITCH] with
// cp.async (16-byte copies when VEC = 4: Q % 4 == 0), dy column q at shared column q + OFF, everything else
// zero-filled by the same copies.
// Compute: item = (plane, VH dx rows from h0, VW dx columns from w0), h0 % SH == 0 and w0 % SW == 0, so the
// stride phase of every (output, tap) pair is a compile-time constant: for output row v and tap row r the dy
// row is h0/SH + (PH + v − r)/SH when SH divides PH + v − r (else the tap meets a zero of the upsampled dy
// and is skipped at compile time), likewise for columns. An item walks its NE dy rows (E0 ≤ e < E0 + NE),
// reads each row's window of NF dy values once (float4 reads when (VW/SW) % 4 == 0) and applies every tap
// that reads it; taps and VH·VW sums stay in registers; stores as in the forward kernel.
// Storage type T (storage.cuh): float, or half16 / bfloat16 — dy is staged as stored (copies of VEC elements:
// 16 bytes for float, 8 for 16-bit types, a single 16-bit element by a plain load), windows are read as
// 4-element vectors converted to float, taps and sums are fp32, dx is rounded to T once at the store.
#include "common.cuh"
#include "storage.cuh"

namespace convtune {
namespace dw {

template <int R, int S, int SH, int SW, int PH, int PW, int H, int W, int P, int Q, int TH, int VH, int VW, int PB,
          int THREADS, int PITCH, int OFF, int VEC, int E0, int NE, int F0, int NF, class T = float>
__device__ __forceinline__ void dw2d_dgrad_body(const T* __restrict__ dy, const T* __restrict__ w,
                                                T* __restrict__ dx, int NC, int C, int nbands) {
  constexpr int IHD = (TH - VH) / SH + NE;                       // staged dy rows per plane
  constexpr int NQ = (W + VW - 1) / VW, NH = TH / VH;
  constexpr int ITEMS = PB * NH * NQ;
  constexpr int QSTEP = VW / SW;                                 // dy columns between column groups
  constexpr int START = F0 + OFF;                                // shared column of the item at w0 = 0
  constexpr bool F4 = QSTEP % 4 == 0 && PITCH % 4 == 0;
  constexpr int D4 = F4 ? ((START % 4) + 4) % 4 : 0;
  constexpr int NCH = (D4 + NF + 3) / 4;
  static_assert(TH % VH == 0 && VH % SH == 0 && VW % SW == 0, "items aligned to the strides");
  static_assert(VEC == 1 || (VEC == 4 && Q % 4 == 0 && OFF % 4 == 0 && PITCH % 4 == 0), "16-byte copies");
  static_assert(OFF + F0 >= 0 && PITCH >= OFF + Q, "the shared row holds the halo and the dy row");
  extern __shared__ __align__(16) unsigned char dw_smem[];
  T* smem = reinterpret_cast<T*>(dw_smem);
  const int bd = blockIdx.x % nbands, pg = blockIdx.x / nbands;
  const int hb = bd * TH;
  const int p0 = hb / SH + E0;  // dy row of staged row 0

  constexpr int CPR = PITCH / VEC;
  for (int i = threadIdx.x; i < PB * IHD * CPR; i += THREADS) {
    const int prow = i / CPR, k = i - (i / CPR) * CPR;
    const int pl = prow / IHD, ir = prow - (prow / IHD) * IHD;
    const int plane = pg * PB + pl, p = p0 + ir, col = k * VEC - OFF;
    const bool ok = plane < NC && p >= 0 && p < P && col >= 0 && col < Q;
    const T* src = ok ? dy + (static_cast<long long>(plane) * P + p) * Q + col : dy;
    cp_async_elems<VEC>(smem + prow * PITCH + k * VEC, src, ok);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  for (int it = threadIdx.x; it < ITEMS; it += THREADS) {
    const int pl = it / (NH * NQ), rem = it - (it / (NH * NQ)) * (NH * NQ);
    const int rg = rem / NQ, qg = rem - (rem / NQ) * NQ;
    const int plane = pg * PB + pl, h0 = hb + rg * VH, w0 = qg * VW;
    if (plane >= NC || h0 >= H) continue;
    const int c = plane % C;
    float wr[R * S];
#pragma unroll
    for (int k = 0; k < R * S; ++k) wr[k] = ldg_f32(w + c * (R * S) + k);
    float acc[VH][VW];
#pragma unroll
    for (int v = 0; v < VH; ++v) {
#pragma unroll
      for (int u = 0; u < VW; ++u) acc[v][u] = 0.f;
    }
    const T* base = smem + (pl * IHD + rg * (VH / SH)) * PITCH + qg * QSTEP + START - D4;
#pragma unroll
    for (int er = 0; er < NE; ++er) {
      float win[F4 ? 4 * NCH : NF];
      if (F4) {
#pragma unroll
        for (int k = 0; k < NCH; ++k) {
          float f[4];
          load4_f32(base + er * PITCH + 4 * k, f);
          win[4 * k] = f[0], win[4 * k + 1] = f[1], win[4 * k + 2] = f[2], win[4 * k + 3] = f[3];
        }
      } else {
#pragma unroll
        for (int k = 0; k < NF; ++k) win[k] = to_f32(base[er * PITCH + k]);
      }
#pragma unroll
      for (int v = 0; v < VH; ++v) {
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const int e = PH + v - r;
          if (e % SH != 0 || e / SH - E0 != er) continue;
#pragma unroll
          for (int s = 0; s < S; ++s) {
#pragma unroll
            for (int u = 0; u < VW; ++u) {
              const int f = PW + u - s;
              if (f % SW != 0) continue;
              acc[v][u] = fmaf(wr[r * S + s], win[D4 + f / SW - F0], acc[v][u]);
            }
          }
        }
      }
    }
#pragma unroll
    for (int v = 0; v < VH; ++v) {
      if (h0 + v >= H) break;
      T* dst = dx + (static_cast<long long>(plane) * H + h0 + v) * W + w0;
      if (W % 4 == 0 && VW % 4 == 0) {
#pragma unroll
        for (int u = 0; u < VW; u += 4) {
          if (w0 + u < W) store4_f32(dst + u, acc[v][u], acc[v][u + 1], acc[v][u + 2], acc[v][u + 3]);
        }
      } else {
#pragma unroll
        for (int u = 0; u < VW; ++u) {
          if (w0 + u < W) dst[u] = from_f32<T>(acc[v][u]);
        }
      }
    }
  }
}

}  // namespace dw
}  // namespace convtune
