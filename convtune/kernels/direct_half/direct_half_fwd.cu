// Direct convolution forward on the CUDA cores for 16-bit storage (bfloat16 / float16), fp32 accumulation, y rounded
// once; NCHW, any stride, padding and dilation; for the few-channel layers (stems, C <= 16) where tensor-core kernels
// pad C to 8-64 channels and pay a layout change:
//
//   y[n,k,p,q] = sum_{c,r,s} x[n, c, p*SH - PH + r*DH, q*SW - PW + s*DW] * w[k,c,r,s]
//
// Grid (ceil(Q / (TX*PT)), ceil(P / TY), N * k_tiles); block TX x TY threads. Thread (tx, ty) of block
// (bx, by, bz) computes output row p = by*TY + ty, columns q0 + i (q0 = (bx*TX + tx)*PT, i < PT), output channels
// k0 + j (j < KB, k0 = (bz % k_tiles)*KB) of image n = bz / k_tiles: PT x KB fp32 accumulators.
// The block's filters wait in shared memory as fp32, [c][r][s][KB] (KB output channels contiguous: one float4 load
// broadcasts four of them to every thread). Per (c, r) a thread reads the SPAN = (PT-1)*SW + (S-1)*DW + 1 input
// elements its PT outputs meet on that input row once (read-only cache; neighbouring threads share them in L1) and
// reuses them across the S taps: PT*KB*S FMAs per SPAN loads and S*KB/4 shared loads.
#include "storage.cuh"

namespace convtune {

template <class T, int KB, int PT, int TX, int TY, int R, int S, int SH, int SW, int DH, int DW>
__device__ __forceinline__ void direct_half_fwd_body(const T* __restrict__ x, const T* __restrict__ w,
                                                     T* __restrict__ y, int C, int H, int W, int K, int P, int Q,
                                                     int PH, int PW, int k_tiles) {
  constexpr int THREADS = TX * TY;
  constexpr int SPAN = (PT - 1) * SW + (S - 1) * DW + 1;
  static_assert(KB % 4 == 0, "output channels in float4 groups");
  extern __shared__ __align__(16) float wsm[];    // [C][R][S][KB]
  const int tid = threadIdx.y * TX + threadIdx.x;
  const int kt = blockIdx.z % k_tiles, n = blockIdx.z / k_tiles;
  const int k0 = kt * KB;
  const int crs = C * R * S;
  for (int idx = tid; idx < crs * KB; idx += THREADS) {   // w[k][c][r][s] -> wsm[(c*R + r)*S + s][j], zero past K
    const int j = idx % KB, e = idx / KB;
    wsm[idx] = k0 + j < K ? ldg_f32(w + static_cast<long long>(k0 + j) * crs + e) : 0.0f;
  }
  __syncthreads();

  const int p = blockIdx.y * TY + threadIdx.y;
  const int q0 = (blockIdx.x * TX + threadIdx.x) * PT;
  if (p >= P || q0 >= Q) return;
  float acc[PT][KB];
#pragma unroll
  for (int i = 0; i < PT; ++i)
#pragma unroll
    for (int j = 0; j < KB; ++j) acc[i][j] = 0.0f;

  const int iw0 = q0 * SW - PW;
  for (int c = 0; c < C; ++c) {
    const T* xc = x + (static_cast<long long>(n) * C + c) * H * W;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int ih = p * SH - PH + r * DH;
      if (ih < 0 || ih >= H) continue;
      const T* row = xc + static_cast<long long>(ih) * W;
      float xs[SPAN];
#pragma unroll
      for (int u = 0; u < SPAN; ++u) {
        const int iw = iw0 + u;
        xs[u] = (iw >= 0 && iw < W) ? ldg_f32(row + iw) : 0.0f;
      }
      const float* wr = wsm + (c * R + r) * S * KB;
#pragma unroll
      for (int s = 0; s < S; ++s) {
#pragma unroll
        for (int j = 0; j < KB; j += 4) {
          const float4 w4 = *reinterpret_cast<const float4*>(wr + s * KB + j);
#pragma unroll
          for (int i = 0; i < PT; ++i) {
            const float v = xs[i * SW + s * DW];
            acc[i][j] = fmaf(v, w4.x, acc[i][j]);
            acc[i][j + 1] = fmaf(v, w4.y, acc[i][j + 1]);
            acc[i][j + 2] = fmaf(v, w4.z, acc[i][j + 2]);
            acc[i][j + 3] = fmaf(v, w4.w, acc[i][j + 3]);
          }
        }
      }
    }
  }

  // y rows: PT consecutive outputs of one channel per thread, consecutive threads consecutive groups; pairs in one
  // 4-byte store where Q is even (q0 is a multiple of PT, so an even pair start stays even in every row)
#pragma unroll
  for (int j = 0; j < KB; ++j) {
    const int k = k0 + j;
    if (k >= K) break;
    T* out = y + ((static_cast<long long>(n) * K + k) * P + p) * Q + q0;
    if constexpr (PT % 2 == 0) {
      if ((Q & 1) == 0 && q0 + PT <= Q) {
#pragma unroll
        for (int i = 0; i < PT; i += 2)
          *reinterpret_cast<unsigned*>(out + i) = static_cast<unsigned>(from_f32<T>(acc[i][j]).bits) |
                                                  (static_cast<unsigned>(from_f32<T>(acc[i + 1][j]).bits) << 16);
        continue;
      }
    }
#pragma unroll
    for (int i = 0; i < PT; ++i)
      if (q0 + i < Q) out[i] = from_f32<T>(acc[i][j]);
  }
}

}  // namespace convtune
