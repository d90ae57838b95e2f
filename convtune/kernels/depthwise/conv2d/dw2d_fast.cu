// 2-D depthwise forward, NCHW fp32, the fast variant: a block per band of output rows of PB planes.
//   y[n,c,p,q] = Σ_{r<R, s<S} w[c,r,s] · x[n, c, p·SH − PH + r, q·SW − PW + s]   (zero outside the image)
// w has shape (C, 1, R, S); planes are (n, c) pairs, plane = n·C + c, each H·W (x) or P·Q (y) contiguous floats.
//
// Block b = (plane group pg, band bd), band fastest: planes pg·PB … pg·PB + PB − 1, output rows
// [bd·TH, bd·TH + TH) × every column. Staging: the band's IH = (TH−1)·SH + R input rows (image rows
// bd·TH·SH − PH + i), full width, go to shared memory [PB][IH][PITCH] with cp.async — 16-byte copies
// when VEC = 4 (W % 4 == 0: every image row is 16-byte aligned), else 4-byte — image column w at shared
// column w + OFF (OFF = PW rounded up to VEC), every other position (halo columns, rows outside the image,
// planes past the last) zero-filled by the same copies (src-size 0): no bounds test in the compute loop.
//
// Compute: item = (plane pl, row group of VH output rows, column group of VW outputs); thread t takes
// items t, t + THREADS, …. An item keeps its plane's R·S taps and VH·VW accumulators in registers and
// walks the (VH−1)·SH + R input rows it needs: each row's window of (VW−1)·SW + S inputs is read once
// (float4 reads when VW·SW % 4 == 0, then every window starts at the same offset modulo 4) and feeds every
// (output row, tap row) pair that uses it — compile-time indices throughout. Results go straight to
// global memory (float4 stores when Q % 4 == 0 and VW % 4 == 0); a warp's items are consecutive columns
// then rows of one plane, so its stores cover contiguous stretches of y.
//
// Storage type T: float, or half16 / bfloat16 (storage.cuh) with every tap and sum in fp32. Shared memory
// holds fp32 either way: 16-bit rows are converted while staged (VEC = 4: an 8-byte load of 4 elements and a
// float4 shared store, synchronous instead of cp.async) and each output is rounded once when stored.
#include "storage.cuh"

namespace convtune {
namespace dw {

template <class T, int R, int S, int SH, int SW, int PH, int PW, int H, int W, int P, int Q, int TH, int VH, int VW,
          int PB, int THREADS, int PITCH, int OFF, int VEC>
__device__ __forceinline__ void dw2d_fast_fwd_body(const T* __restrict__ x, const T* __restrict__ w,
                                                   T* __restrict__ y, int NC, int C, int nbands) {
  constexpr int IH = (TH - 1) * SH + R;
  constexpr int NQ = (Q + VW - 1) / VW, NH = (TH + VH - 1) / VH;  // column groups, row groups per band
  constexpr int ITEMS = PB * NH * NQ;
  constexpr int WIN = (VW - 1) * SW + S;
  constexpr int DELTA = OFF - PW;                                  // shared column of input column −PW
  constexpr bool F4 = (VW * SW) % 4 == 0 && PITCH % 4 == 0;        // float4 window reads
  constexpr int D4 = F4 ? DELTA % 4 : 0;
  constexpr int NCH = (D4 + WIN + 3) / 4;                          // float4 reads per window
  constexpr int ROWS_IN = (VH - 1) * SH + R;                       // input rows of one item
  static_assert(VEC == 1 || (VEC == 4 && W % 4 == 0 && OFF % 4 == 0 && PITCH % 4 == 0), "16-byte copies");
  static_assert(OFF >= PW && PITCH >= OFF + W, "the shared row holds the left halo and the image row");
  extern __shared__ __align__(16) float smem[];
  const int bd = blockIdx.x % nbands, pg = blockIdx.x / nbands;
  const int p0 = bd * TH, h0 = p0 * SH - PH;

  // staging (zero fill included): PB·IH rows of PITCH / VEC copies
  constexpr int CPR = PITCH / VEC;
  for (int i = threadIdx.x; i < PB * IH * CPR; i += THREADS) {
    const int prow = i / CPR, k = i - (i / CPR) * CPR;
    const int pl = prow / IH, ir = prow - (prow / IH) * IH;
    const int plane = pg * PB + pl, h = h0 + ir, col = k * VEC - OFF;
    const bool ok = plane < NC && h >= 0 && h < H && col >= 0 && col < W;
    const T* src = ok ? x + (static_cast<long long>(plane) * H + h) * W + col : x;
    if constexpr (sizeof(T) == 4) {
      if (VEC == 4) {
        cp_async16(smem + prow * PITCH + k * 4, reinterpret_cast<const float*>(src), ok);
      } else {
        cp_async4(smem + prow * PITCH + k, reinterpret_cast<const float*>(src), ok);
      }
    } else if (VEC == 4) {
      float v[4] = {0.f, 0.f, 0.f, 0.f};
      if (ok) load4_f32(src, v);
      *reinterpret_cast<float4*>(smem + prow * PITCH + k * 4) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
      smem[prow * PITCH + k] = ok ? ldg_f32(src) : 0.f;
    }
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  for (int it = threadIdx.x; it < ITEMS; it += THREADS) {
    const int pl = it / (NH * NQ), rem = it - (it / (NH * NQ)) * (NH * NQ);
    const int rg = rem / NQ, qg = rem - (rem / NQ) * NQ;
    const int plane = pg * PB + pl, p = p0 + rg * VH, q = qg * VW;
    if (plane >= NC || p >= P) continue;
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
    const float* base = smem + (pl * IH + rg * VH * SH) * PITCH + q * SW + DELTA - D4;
#pragma unroll
    for (int ir = 0; ir < ROWS_IN; ++ir) {
      float win[F4 ? 4 * NCH : WIN];
      if (F4) {
#pragma unroll
        for (int k = 0; k < NCH; ++k) {
          const float4 f = *reinterpret_cast<const float4*>(base + ir * PITCH + 4 * k);
          win[4 * k] = f.x, win[4 * k + 1] = f.y, win[4 * k + 2] = f.z, win[4 * k + 3] = f.w;
        }
      } else {
#pragma unroll
        for (int k = 0; k < WIN; ++k) win[k] = base[ir * PITCH + k];
      }
#pragma unroll
      for (int v = 0; v < VH; ++v) {
        const int r = ir - v * SH;  // tap row of output row v that reads input row ir
        if (r < 0 || r >= R) continue;
#pragma unroll
        for (int s = 0; s < S; ++s) {
#pragma unroll
          for (int u = 0; u < VW; ++u) acc[v][u] = fmaf(wr[r * S + s], win[D4 + u * SW + s], acc[v][u]);
        }
      }
    }
#pragma unroll
    for (int v = 0; v < VH; ++v) {
      if (p + v >= P) break;
      T* dst = y + (static_cast<long long>(plane) * P + p + v) * Q + q;
      if (Q % 4 == 0 && VW % 4 == 0) {
#pragma unroll
        for (int u = 0; u < VW; u += 4) {
          if (q + u < Q) store4_f32(dst + u, acc[v][u], acc[v][u + 1], acc[v][u + 2], acc[v][u + 3]);
        }
      } else {
#pragma unroll
        for (int u = 0; u < VW; ++u) {
          if (q + u < Q) dst[u] = from_f32<T>(acc[v][u]);
        }
      }
    }
  }
}

}  // namespace dw
}  // namespace convtune
