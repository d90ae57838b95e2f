// Deterministic second pass of the depthwise weight gradients: dw[c, j] = Σ_p part[(p·C + c)·KE + j] over
// slices p in increasing order (slots p·C + c ≥ G hold nothing and are skipped); dw[c, j] = 0 for j ≥ KE.
// dw has shape (C, K) (1-D: K taps; 2-D: K = R·S). One block covers 32 consecutive outputs with RW warps:
// warp r sums slices p ≡ r (mod RW), then warp 0 adds the RW sums in order — a fixed summation tree, so
// the result is bitwise the same on every run. The sums are fp32; dw is stored as T (storage.cuh: float, or a
// 16-bit type rounded once here). With P = 1, G = C and KE = K it converts an fp32 [C, K] buffer (the atomic
// weight gradient's workspace of 16-bit storage) into dw.
#include "storage.cuh"

namespace convtune {
namespace dw {

template <int RW, class T = float>
__device__ __forceinline__ void reduce_body(const float* __restrict__ part, T* __restrict__ dw, int P, int G, int C,
                                            int K, int KE) {
  __shared__ float red[RW][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int o = blockIdx.x * 32 + lane;
  const bool valid = o < C * K;
  const int c = o / K, j = o - (o / K) * K;
  float s = 0.f;
  if (valid && j < KE) {
#pragma unroll 4
    for (int p = warp; p < P; p += RW) {
      const int slot = p * C + c;
      if (slot < G) s += part[slot * KE + j];
    }
  }
  red[warp][lane] = s;
  __syncthreads();
  if (warp == 0 && valid) {
    float t = 0.f;
#pragma unroll
    for (int r = 0; r < RW; ++r) t += red[r][lane];
    dw[o] = from_f32<T>(t);
  }
}

}  // namespace dw
}  // namespace convtune
