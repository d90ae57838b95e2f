// 2-D depthwise forward, NCHW fp32, the packed variant for small images (W, Q ≤ 32): a block per group of PB
// whole planes, staged and stored as one contiguous stretch of memory.
//   y[n,c,p,q] = Σ_{r<R, s<S} w[c,r,s] · x[n, c, p·SH − PH + r, q·SW − PW + s]   (zero outside the image)
// w has shape (C, 1, R, S); planes are (n, c) pairs, plane = n·C + c, each H·W (x) or P·Q (y) contiguous floats,
// so the PB planes of block b are the contiguous PB·H·W floats from b·PB·H·W on.
//
// Why a separate kernel: on 7×7 and 14×14 planes the fast variant's row staging (a copy per image row and per
// halo column, 4-byte copies when W % 4 ≠ 0) costs more instructions than the data it moves, and its stores
// are a few floats per row. Here the block copies its input stretch with 16-byte cp.async (when the stretch
// and x are 16-byte aligned; 4-byte otherwise: the last, partial group, or an odd PB·H·W), computes into a
// shared output stretch, and writes that back with float4 stores: two fully coalesced streams.
//
// Compute: item = (plane pl, row group of VH output rows × all Q columns); thread t takes items t, t + THREADS,
// …, plane-major. An item keeps its plane's R·S taps and VH·Q accumulators in registers and walks the
// (VH−1)·SH + R input rows it needs, skipping rows outside the image (the one runtime test); each row is read
// once into registers (W floats) and feeds every (output row, tap row) pair that uses it. Column validity
// (q·SW − PW + s inside [0, W)) is a compile-time fact, so the padding costs nothing.
//
// Storage type T: float, or half16 / bfloat16 (storage.cuh) with every tap and sum in fp32. Shared memory
// holds fp32 either way: 16-bit inputs are converted while staged (8-byte loads of 4 elements, then a float4
// shared store) and each output is rounded once when written back (8-byte stores of 4 elements).
#include "storage.cuh"

namespace convtune {
namespace dw {

template <class T, int R, int S, int SH, int SW, int PH, int PW, int H, int W, int P, int Q, int VH, int PB,
          int THREADS>
__device__ __forceinline__ void dw2d_packed_fwd_body(const T* __restrict__ x, const T* __restrict__ w,
                                                     T* __restrict__ y, int NC, int C) {
  constexpr unsigned long long VEC_ALIGN = 4 * sizeof(T) - 1;  // a 4-element access: 16 (fp32) or 8 bytes
  constexpr int PLANE_IN = H * W, PLANE_OUT = P * Q;
  constexpr int IN = PB * PLANE_IN, OUT = PB * PLANE_OUT;
  constexpr int IN_ROUNDED = (IN + 3) / 4 * 4;       // the output stretch starts 16-byte aligned
  constexpr int NH = (P + VH - 1) / VH, ITEMS = PB * NH;
  constexpr int ROWS_IN = (VH - 1) * SH + R;
  extern __shared__ __align__(16) float smem[];
  float* xs = smem;
  float* ys = smem + IN_ROUNDED;
  const int first = blockIdx.x * PB;
  const int np = min(PB, NC - first);                // planes of this block (the last group may be partial)
  const T* xb = x + static_cast<long long>(first) * PLANE_IN;
  T* yb = y + static_cast<long long>(first) * PLANE_OUT;

  if (IN % 4 == 0 && np == PB && (reinterpret_cast<unsigned long long>(x) & VEC_ALIGN) == 0) {
    for (int i = threadIdx.x; i < IN / 4; i += THREADS) {
      if constexpr (sizeof(T) == 4) {
        cp_async16(xs + 4 * i, reinterpret_cast<const float*>(xb) + 4 * i, true);
      } else {
        float v[4];
        load4_f32(xb + 4 * i, v);
        *reinterpret_cast<float4*>(xs + 4 * i) = make_float4(v[0], v[1], v[2], v[3]);
      }
    }
  } else {
    for (int i = threadIdx.x; i < np * PLANE_IN; i += THREADS) {
      if constexpr (sizeof(T) == 4) {
        cp_async4(xs + i, reinterpret_cast<const float*>(xb) + i, true);
      } else {
        xs[i] = ldg_f32(xb + i);
      }
    }
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  for (int it = threadIdx.x; it < ITEMS; it += THREADS) {
    const int pl = it / NH, rg = it - (it / NH) * NH;
    if (pl >= np) break;                             // items are plane-major: every later item is past np too
    const int c = (first + pl) % C;
    float wr[R * S];
#pragma unroll
    for (int k = 0; k < R * S; ++k) wr[k] = ldg_f32(w + c * (R * S) + k);
    float acc[VH][Q];
#pragma unroll
    for (int v = 0; v < VH; ++v) {
#pragma unroll
      for (int q = 0; q < Q; ++q) acc[v][q] = 0.f;
    }
    const int p = rg * VH;
    const float* xp = xs + pl * PLANE_IN;
#pragma unroll
    for (int ir = 0; ir < ROWS_IN; ++ir) {
      const int h = p * SH - PH + ir;
      if (h < 0 || h >= H) continue;                 // zero padding rows contribute nothing
      float row[W];
#pragma unroll
      for (int k = 0; k < W; ++k) row[k] = xp[h * W + k];
#pragma unroll
      for (int v = 0; v < VH; ++v) {
        const int r = ir - v * SH;                   // tap row of output row v that reads input row ir
        if (r < 0 || r >= R) continue;
#pragma unroll
        for (int q = 0; q < Q; ++q) {
#pragma unroll
          for (int s = 0; s < S; ++s) {
            const int col = q * SW - PW + s;         // compile time: padding columns vanish
            if (col >= 0 && col < W) acc[v][q] = fmaf(wr[r * S + s], row[col], acc[v][q]);
          }
        }
      }
    }
#pragma unroll
    for (int v = 0; v < VH; ++v) {
      if (p + v >= P) break;
#pragma unroll
      for (int q = 0; q < Q; ++q) ys[pl * PLANE_OUT + (p + v) * Q + q] = acc[v][q];
    }
  }
  __syncthreads();

  if (OUT % 4 == 0 && np == PB && (reinterpret_cast<unsigned long long>(y) & VEC_ALIGN) == 0) {
    for (int i = threadIdx.x; i < OUT / 4; i += THREADS) {
      const float4 v = reinterpret_cast<const float4*>(ys)[i];
      store4_f32(yb + 4 * i, v.x, v.y, v.z, v.w);
    }
  } else {
    for (int i = threadIdx.x; i < np * PLANE_OUT; i += THREADS) yb[i] = from_f32<T>(ys[i]);
  }
}

}  // namespace dw
}  // namespace convtune
