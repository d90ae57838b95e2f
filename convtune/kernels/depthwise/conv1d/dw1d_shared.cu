// Causal depthwise 1-D, shared-memory cache-blocked variant.
//
// A block covers one channel c, RB consecutive batch rows b0..b0+RB−1 (rows b·C + c, C·L floats apart) and
// one sequence tile [l0, l0 + T). It stages the rows' window — the tile plus the KE−1 halo the taps reach
// (left of the tile for fwd and for x in wgrad, right of it for dgrad) — and w[c, :KE] in shared memory
// with zero fill outside [0, L) and past B, then computes from shared memory only.
// Block index (flattened): tile fastest, then batch group, then channel.
//
// Dynamic shared memory (floats): fwd/dgrad KE + RB·(T+KE−1); wgrad RB·(T+KE−1) + RB·T.
// wgrad: thread owns taps j ≡ tid (mod THREADS), sums over the block's rows and tile, then leaves partial
// slice p = bg·ntl + tile (deterministic) or one atomic add per (block, j).
#include "depthwise/dw1d_common.cuh"

namespace convtune {
namespace dw {

template <int PATH, int THREADS, bool ATOMIC>
__device__ __forceinline__ void shared_body(const float* __restrict__ a, const float* __restrict__ b_in,
                                            float* __restrict__ out, int B, int C, int L, int K, int KE, int RB,
                                            int T, int ntl, int nbg) {
  extern __shared__ float smem[];
  const int bid = blockIdx.x;
  const int tile = bid % ntl;
  const int rest = bid / ntl;
  const int bg = rest % nbg;
  const int c = rest / nbg;
  const int l0 = tile * T, b0 = bg * RB, H = KE - 1, WIN = T + H;
  float* ws = smem;                                  // fwd/dgrad: w[c, :KE]
  float* xs = smem + (PATH == PATH_WGRAD ? 0 : KE);  // [RB][WIN] window of x (fwd, wgrad) or dy (dgrad)
  float* ds = xs + RB * WIN;                         // wgrad: [RB][T] tile of dy

  for (int i = threadIdx.x; i < RB * WIN; i += THREADS) {
    const int r = i / WIN, k = i - (i / WIN) * WIN;
    const int bb = b0 + r;
    const int p = (PATH == PATH_DGRAD) ? l0 + k : l0 - H + k;
    xs[i] = (bb < B && p >= 0 && p < L) ? a[(bb * C + c) * L + p] : 0.f;
  }
  if (PATH == PATH_WGRAD) {
    for (int i = threadIdx.x; i < RB * T; i += THREADS) {
      const int r = i / T, k = i - (i / T) * T;
      const int bb = b0 + r, p = l0 + k;
      ds[i] = (bb < B && p < L) ? b_in[(bb * C + c) * L + p] : 0.f;
    }
  } else {
    for (int j = threadIdx.x; j < KE; j += THREADS) ws[j] = b_in[c * K + j];
  }
  __syncthreads();

  if (PATH == PATH_WGRAD) {
    for (int j = threadIdx.x; j < KE; j += THREADS) {
      float acc = 0.f;
      for (int r = 0; r < RB; ++r) {
        const float* xr = xs + r * WIN + H - j;  // x[t − j] of tile position t
        const float* dr = ds + r * T;
        for (int t = 0; t < T; ++t) acc = fmaf(dr[t], xr[t], acc);
      }
      if (ATOMIC) {
        atomicAdd(out + c * K + j, acc);
      } else {
        out[((bg * ntl + tile) * C + c) * KE + j] = acc;
      }
    }
  } else {
    for (int o = threadIdx.x; o < RB * T; o += THREADS) {
      const int r = o / T, t = o - (o / T) * T;
      const int bb = b0 + r, s = l0 + t;
      if (bb >= B || s >= L) continue;
      const float* xr = xs + r * WIN;
      float acc = 0.f;
      if (PATH == PATH_FWD) {
        const int jmax = min(KE - 1, s);  // skip the causal zeros
        for (int j = 0; j <= jmax; ++j) acc = fmaf(ws[j], xr[t + H - j], acc);
      } else {
        const int jmax = min(KE - 1, L - 1 - s);
        for (int j = 0; j <= jmax; ++j) acc = fmaf(ws[j], xr[t + j], acc);
      }
      out[(bb * C + c) * L + s] = acc;
    }
  }
}

}  // namespace dw
}  // namespace convtune
