// Unfused Winograd F(m×m, r×r) forward for filters other than 3×3 (the 5×5 family), fp32 NCHW, stride 1,
// dilation 1, any padding: the three kernels of winograd_unfused.cu with α = M + R − 1.
//
//   0. filter transform  w (K,C,R,R)            -> U (α², Cp, Kp)   U[ξ][c][k] = (G g_kc Gᵀ)[ξ]
//   1. input transform   x (N,C,H,W)            -> V (α², Cp, Tp)   V[ξ][c][t] = (Bᵀ d_{c,t} B)[ξ]
//   2. batched GEMM      U, V                    -> M (α², Kp, Tp)   winograd_gemm_body, unchanged
//   3. output transform  M                        -> y (N,K,P,Q)      Y_{k,t} = Aᵀ M_{k,t} A, cropped to P×Q
//
// The 3×3 families' sources stay byte-for-byte what they were (their kernel versions, and so every stored
// measurement of them, stay valid): the transforms here are theirs with R as a template parameter, and the GEMM
// is included from winograd_unfused.cu. wino_input_transform / wino_output_transform (α × α) are prepended by
// the launcher (transforms.py, F(M, R)).
#include "winograd_unfused.cu"

namespace convtune {

// One thread per (c, t) of the padded Cp × Tp grid; t fastest so the α² stores of a warp are coalesced.
template <int M, int R>
__device__ __forceinline__ void winograd_input_body_r(const float* __restrict__ x, float* __restrict__ V, int C,
                                                      int H, int W, int pad_h, int pad_w, int tiles_p, int tiles_q,
                                                      int tiles, int Cp, int Tp) {
  constexpr int A = M + R - 1;
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

// One thread per (k, t) with k < K, t < T (t fastest: the α² loads of a warp are coalesced).
template <int M, int R>
__device__ __forceinline__ void winograd_output_body_r(const float* __restrict__ Mi, float* __restrict__ y, int K,
                                                       int P, int Q, int tiles_p, int tiles_q, int tiles, int Kp,
                                                       int Tp) {
  constexpr int A = M + R - 1;
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

// U = G g Gᵀ, one thread per (c, k) of the padded Cp × Kp plane, k fastest (coalesced α² stores); products and
// sums in double, rounded to float once; G (A × R) from the launcher's generated wrapper.
template <int A, int R>
__device__ __forceinline__ void winograd_filter_body_r(const float* __restrict__ w, float* __restrict__ U, int C,
                                                       int K, int Cp, int Kp, const double (&G)[A][R]) {
  const long long plane = static_cast<long long>(Cp) * Kp;
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= plane) return;
  const int c = static_cast<int>(i / Kp), k = static_cast<int>(i % Kp);
  const bool live = c < C && k < K;
  double g[R][R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int s = 0; s < R; ++s) {
      g[r][s] = live ? static_cast<double>(w[(static_cast<size_t>(k) * C + c) * R * R + r * R + s]) : 0.0;
    }
  }
  double t[A][R];  // t = G g
#pragma unroll
  for (int a = 0; a < A; ++a) {
#pragma unroll
    for (int s = 0; s < R; ++s) {
      double acc = 0.0;
#pragma unroll
      for (int r = 0; r < R; ++r) acc += G[a][r] * g[r][s];
      t[a][s] = acc;
    }
  }
#pragma unroll
  for (int a = 0; a < A; ++a) {
#pragma unroll
    for (int b = 0; b < A; ++b) {
      double u = 0.0;
#pragma unroll
      for (int s = 0; s < R; ++s) u += t[a][s] * G[b][s];
      U[static_cast<size_t>(a * A + b) * plane + i] = static_cast<float>(u);
    }
  }
}

}  // namespace convtune
