// Unfused Winograd F(m×m, 3×3) forward, fp32 NCHW, stride 1, dilation 1, any padding: three kernels.
//
//   1. input transform   x (N,C,H,W)            -> V (α², Cp, Tp)   V[ξ][c][t] = (Bᵀ d_{c,t} B)[ξ]
//   2. batched GEMM      U (α², Cp, Kp), V       -> M (α², Kp, Tp)   M[ξ][k][t] = Σ_c U[ξ][c][k] · V[ξ][c][t]
//   3. output transform  M                        -> y (N,K,P,Q)      Y_{k,t} = Aᵀ M_{k,t} A, cropped to P×Q
//
// Tiles t = (img·tiles_p + tp)·tiles_q + tq, T = N·tiles_p·tiles_q, padded to Tp (multiple of the GEMM's
// BT), channels to Cp (multiple of BC) and Kp (multiple of BK). The input transform writes zeros for the
// padding rows/columns of V and U is zero-padded, so the GEMM runs without a single bounds test.
// wino_input_transform / wino_output_transform are prepended by the launcher (transforms.py).
#include "common.cuh"

namespace convtune {

// One thread per (c, t) of the padded Cp × Tp grid; t fastest so the α² stores of a warp are coalesced.
template <int M>
__device__ __forceinline__ void winograd_input_body(const float* __restrict__ x, float* __restrict__ V, int C,
                                                    int H, int W, int pad_h, int pad_w, int tiles_p, int tiles_q,
                                                    int tiles, int Cp, int Tp) {
  constexpr int A = M + 2;
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const int c = blockIdx.y;
  if (t >= Tp) return;
  float raw[A][A];
  const bool live = t < tiles && c < C;
  int img = 0, tp = 0, tq = 0;
  if (live) {
    tq = t % tiles_q;
    tp = (t / tiles_q) % tiles_p;
    img = t / (tiles_q * tiles_p);
  }
  const int h0 = tp * M - pad_h, w0 = tq * M - pad_w;
  const float* base = x + ((size_t)img * C + (live ? c : 0)) * H * W;
#pragma unroll
  for (int i = 0; i < A; ++i) {
    const bool row_ok = live && h0 + i >= 0 && h0 + i < H;
#pragma unroll
    for (int j = 0; j < A; ++j) {
      const bool ok = row_ok && w0 + j >= 0 && w0 + j < W;
      raw[i][j] = ok ? __ldg(base + (size_t)(h0 + i) * W + (w0 + j)) : 0.0f;
    }
  }
  float v[A][A];
  wino_input_transform(raw, v);
  const size_t plane = (size_t)Cp * Tp;
  float* dst = V + (size_t)c * Tp + t;
#pragma unroll
  for (int xi = 0; xi < A; ++xi)
#pragma unroll
    for (int nu = 0; nu < A; ++nu) dst[(xi * A + nu) * plane] = v[xi][nu];
}

// Batched SGEMM, one ξ per blockIdx.z; block tile BK (k) × BT (t) × BC (c); thread tile TK × TT made of
// 4-wide column groups spread over the block tile (group g of a thread sits at g·(B/(T/4))·... see below)
// so that the float4 shared-memory reads of a quarter-warp hit 8 distinct 16-byte bank groups.
// STAGES-deep cp.async pipeline (16-byte copies; every tile row is contiguous in global memory).
template <int BK, int BT, int BC, int TK, int TT, int STAGES>
__device__ __forceinline__ void winograd_gemm_body(const float* __restrict__ U, const float* __restrict__ V,
                                                   float* __restrict__ Mo, int Cp, int Kp, int Tp) {
  constexpr int THREADS_T = BT / TT, THREADS_K = BK / TK;
  constexpr int THREADS = THREADS_T * THREADS_K;
  constexpr int GK = TK / 4, GT = TT / 4;           // 4-wide groups per thread tile
  constexpr int A_FLOATS = BC * BK, B_FLOATS = BC * BT, STAGE_FLOATS = A_FLOATS + B_FLOATS;
  static_assert(TK % 4 == 0 && TT % 4 == 0, "thread tiles are made of float4 groups");
  static_assert(BK % TK == 0 && BT % TT == 0, "thread tiles divide the block tile");
  extern __shared__ __align__(16) float smem[];

  const int tid = threadIdx.x;
  const int xi = blockIdx.z;
  const int t0 = blockIdx.x * BT, k0 = blockIdx.y * BK;
  const float* Ug = U + (size_t)xi * Cp * Kp + k0;
  const float* Vg = V + (size_t)xi * Cp * Tp + t0;
  const int chunks = Cp / BC;

  auto issue = [&](int stage, int chunk) {
    float* as = smem + stage * STAGE_FLOATS;
    float* bs = as + A_FLOATS;
    const int c0 = chunk * BC;
#pragma unroll
    for (int idx = tid; idx < A_FLOATS / 4; idx += THREADS) {
      const int cc = idx / (BK / 4), kk = 4 * (idx % (BK / 4));
      cp_async16(as + cc * BK + kk, Ug + (size_t)(c0 + cc) * Kp + kk, true);
    }
#pragma unroll
    for (int idx = tid; idx < B_FLOATS / 4; idx += THREADS) {
      const int cc = idx / (BT / 4), tt = 4 * (idx % (BT / 4));
      cp_async16(bs + cc * BT + tt, Vg + (size_t)(c0 + cc) * Tp + tt, true);
    }
  };

  // thread (tk_idx, tt_idx); its group g along t covers columns g·(BT/GT) + 4·tt_idx + [0, 4)
  const int tt_idx = tid % THREADS_T, tk_idx = tid / THREADS_T;
  float acc[TK][TT];
#pragma unroll
  for (int a = 0; a < TK; ++a)
#pragma unroll
    for (int b = 0; b < TT; ++b) acc[a][b] = 0.0f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < chunks) issue(s, s);
    cp_async_commit();
  }
#pragma unroll 1
  for (int chunk = 0; chunk < chunks; ++chunk) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();   // stage `chunk` landed for everyone; the stage refilled below is no longer read
    const int next = chunk + STAGES - 1;
    if (next < chunks) issue(next % STAGES, next);
    cp_async_commit();
    const float* as = smem + (chunk % STAGES) * STAGE_FLOATS;
    const float* bs = as + A_FLOATS;
#pragma unroll
    for (int cc = 0; cc < BC; ++cc) {
      float a[TK], b[TT];
#pragma unroll
      for (int g = 0; g < GK; ++g) {
        const float4 v4 = *reinterpret_cast<const float4*>(as + cc * BK + g * (BK / GK) + 4 * tk_idx);
        a[4 * g] = v4.x; a[4 * g + 1] = v4.y; a[4 * g + 2] = v4.z; a[4 * g + 3] = v4.w;
      }
#pragma unroll
      for (int g = 0; g < GT; ++g) {
        const float4 v4 = *reinterpret_cast<const float4*>(bs + cc * BT + g * (BT / GT) + 4 * tt_idx);
        b[4 * g] = v4.x; b[4 * g + 1] = v4.y; b[4 * g + 2] = v4.z; b[4 * g + 3] = v4.w;
      }
#pragma unroll
      for (int i = 0; i < TK; ++i)
#pragma unroll
        for (int j = 0; j < TT; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
  }
  cp_async_wait<0>();

  float* out = Mo + (size_t)xi * Kp * Tp;
#pragma unroll
  for (int i = 0; i < TK; ++i) {
    const int k = k0 + (i / 4) * (BK / GK) + 4 * tk_idx + (i % 4);
#pragma unroll
    for (int g = 0; g < GT; ++g) {
      const int t = t0 + g * (BT / GT) + 4 * tt_idx;
      *reinterpret_cast<float4*>(out + (size_t)k * Tp + t) =
          make_float4(acc[i][4 * g], acc[i][4 * g + 1], acc[i][4 * g + 2], acc[i][4 * g + 3]);
    }
  }
}

// One thread per (k, t) with k < K, t < T (t fastest: the α² loads of a warp are coalesced).
template <int M>
__device__ __forceinline__ void winograd_output_body(const float* __restrict__ Mi, float* __restrict__ y, int K,
                                                     int P, int Q, int tiles_p, int tiles_q, int tiles, int Kp,
                                                     int Tp) {
  constexpr int A = M + 2;
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const int k = blockIdx.y;
  if (t >= tiles) return;
  const size_t plane = (size_t)Kp * Tp;
  const float* src = Mi + (size_t)k * Tp + t;
  float mm[A][A], out[M][M];
#pragma unroll
  for (int f = 0; f < A * A; ++f) mm[f / A][f % A] = __ldg(src + f * plane);
  wino_output_transform(mm, out);
  const int tq = t % tiles_q, tp = (t / tiles_q) % tiles_p, img = t / (tiles_q * tiles_p);
  float* dst = y + ((size_t)img * K + k) * P * Q;
#pragma unroll
  for (int i = 0; i < M; ++i) {
    const int p = tp * M + i;
    if (p >= P) continue;
#pragma unroll
    for (int j = 0; j < M; ++j) {
      const int q = tq * M + j;
      if (q < Q) dst[(size_t)p * Q + q] = out[i][j];
    }
  }
}

}  // namespace convtune
