// The wgmma GEMM kernels' epilogue (sm_90a): a block's BM x BN tile of fp32 accumulators into y (N, K, P, Q).
#pragma once
#include "wgmma_common.cuh"
#include "wgmma_storage.cuh"

namespace convtune {

// Run by the THREADS = 128 * WG threads that computed the tile (ctid = 0 .. THREADS - 1; warpgroup wg = ctid / 128
// holds rows wg * BM / WG ..): with gridDim.z > 1 (split reduction) fp32 atomics into ysplit (TF32: y itself;
// 16-bit: a workspace converted afterwards); else the tile through shared memory, [BN channels][BM + 16 bytes of
// pixels] in T, then channel by channel: consecutive threads store consecutive pixel pairs of one channel (NCHW
// rows), one 2*E-byte store where P*Q is even (a pair then never straddles an image), two E-byte ones otherwise; full
// 32-byte sectors instead of the fragments' runs of 8 pixels. Where the staged tile does not fit the STAGE_BYTES_ALL
// bytes of stages at `staged` (32-byte rows), the fragments go straight to y. sync() is a barrier of the THREADS
// threads after which no copy or MMA reads the stages any more.
template <class T, int BN, int MI, int WG, int STAGE_BYTES_ALL, class Sync>
__device__ __forceinline__ void wgmma_store_tile(const float (&acc)[MI][BN / 2], T* __restrict__ y,
                                                 float* __restrict__ ysplit, unsigned char* staged, long long m0,
                                                 int n0, long long M, int PQ, int K, int ctid, Sync&& sync) {
  using Bits = decltype(T::bits);
  constexpr int E = static_cast<int>(sizeof(T));
  constexpr int THREADS = 128 * WG, BM = 64 * WG * MI;
  const int warp = ctid >> 5, wg = warp >> 2, lane = ctid & 31, wq = warp & 3, g = lane >> 2, t = lane & 3;
  // this thread's fragments with m < M and col < K straight to global memory (a plain lambda: NVRTC takes no
  // generic one in device code)
  auto store_fragments = [&](bool atomics) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
      for (int e2 = 0; e2 < 2; ++e2) {
        const long long m = m0 + wg * (BM / WG) + mi * 64 + wq * 16 + g + 8 * e2;
        if (m >= M) continue;
        const long long img = m / PQ;
        const long long row = img * K * PQ + (m - img * PQ);
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
          for (int e1 = 0; e1 < 2; ++e1) {
            const int col = n0 + 8 * j + 2 * t + e1;
            if (col >= K) continue;
            const long long at = row + static_cast<long long>(col) * PQ;
            if (atomics) {
              atomicAdd(ysplit + at, acc[mi][j * 4 + 2 * e2 + e1]);
            } else {
              y[at] = round_to<T>(acc[mi][j * 4 + 2 * e2 + e1]);
            }
          }
      }
    }
  };
  if (gridDim.z > 1) {
    store_fragments(true);
    return;
  }
  constexpr int LD = BM + 16 / E;   // 16 bytes of padding: a warp's fragment writes spread over the banks
  if constexpr (BN * LD * E + BM * 8 > STAGE_BYTES_ALL) {
    store_fragments(false);
    return;
  }
  sync();
  Bits* tile = reinterpret_cast<Bits*>(staged);
  long long* pix = reinterpret_cast<long long*>(staged + BN * LD * E);   // y offset of each pixel's channel 0
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int e2 = 0; e2 < 2; ++e2)
#pragma unroll
      for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int e1 = 0; e1 < 2; ++e1)
          tile[(8 * j + 2 * t + e1) * LD + wg * (BM / WG) + mi * 64 + wq * 16 + g + 8 * e2] =
              round_to<T>(acc[mi][j * 4 + 2 * e2 + e1]).bits;
  for (int i = ctid; i < BM; i += THREADS) {   // one division per pixel of the tile, not one per store
    const long long m = m0 + i;
    const long long img = m / PQ;
    pix[i] = m < M ? img * K * PQ + (m - img * PQ) : 0;
  }
  sync();
  const bool even = (PQ & 1) == 0;
  Bits* yb = reinterpret_cast<Bits*>(y);
  for (int idx = ctid; idx < BN * (BM / 2); idx += THREADS) {
    const int cl = idx / (BM / 2), pr = idx - cl * (BM / 2);
    const int col = n0 + cl;
    const long long m = m0 + 2 * pr;
    if (col >= K || m >= M) continue;
    const Bits* src = tile + cl * LD + 2 * pr;
    const long long at = pix[2 * pr] + static_cast<long long>(col) * PQ;
    if (even) {   // m even and P*Q even: m + 1 is a pixel of the same image (M is even), the pair 2E-byte aligned
      if constexpr (E == 4) {
        *reinterpret_cast<uint2*>(yb + at) = make_uint2(src[0], src[1]);
      } else {
        *reinterpret_cast<unsigned*>(yb + at) = static_cast<unsigned>(src[0]) | (static_cast<unsigned>(src[1]) << 16);
      }
    } else {
      yb[at] = src[0];
      if (m + 1 < M) yb[pix[2 * pr + 1] + static_cast<long long>(col) * PQ] = src[1];
    }
  }
}

}  // namespace convtune
