// Unfused 1-D Winograd F(m, r) along one axis for 1×r and r×1 filters, fp32 NCHW, stride 1, dilation 1, any
// padding: the three kernels of winograd_unfused.cu with tiles of 1×M outputs (ALONG_W: a 1×R filter) or M×1 (an
// R×1 filter) and α = M + R − 1 transform points instead of α².
//
//   0. filter transform  w (K,C,R) as stored        -> U (α, Cp, Kp)   U[ξ][c][k] = (G g_kc)[ξ]
//   1. input transform   x (N,C,H,W)                -> V (α, Cp, Tp)   V[ξ][c][t] = (Bᵀ d_{c,t})[ξ]
//   2. batched GEMM      U, V                       -> M (α, Kp, Tp)   winograd_gemm_body, unchanged
//   3. output transform  M                          -> y (N,K,P,Q)     y_{k,t} = Aᵀ M_{k,t}, cropped to P×Q
//
// A 1×R or R×1 filter stores its R taps contiguously (K, C, R, 1) / (K, C, 1, R), so the filter transform reads
// both alike. Tiles: t = (img·tiles_p + tp)·tiles_q + tq as in the 2-D paths; along the filter's axis a tile holds
// M outputs, across it one. The 2-D families' sources stay byte-for-byte what they were: the GEMM is included from
// winograd_unfused.cu. wino1_input_transform / wino1_output_transform are prepended by the launcher (transforms.py,
// device_code_1d).
#include "winograd_unfused.cu"

namespace convtune {

// One thread per (c, t) of the padded Cp × Tp grid; t fastest so the α stores of a warp are coalesced.
template <int M, int R, bool ALONG_W>
__device__ __forceinline__ void winograd_input_body_1d(const float* __restrict__ x, float* __restrict__ V, int C,
                                                       int H, int W, int pad_h, int pad_w, int tiles_p, int tiles_q,
                                                       int tiles, int Cp, int Tp) {
  constexpr int A = M + R - 1;
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const int c = blockIdx.y;
  if (t >= Tp) return;
  const bool live = t < tiles && c < C;
  int img = 0, tp = 0, tq = 0;
  if (live) {
    tq = t % tiles_q;
    tp = (t / tiles_q) % tiles_p;
    img = t / (tiles_q * tiles_p);
  }
  const int h0 = tp * (ALONG_W ? 1 : M) - pad_h, w0 = tq * (ALONG_W ? M : 1) - pad_w;
  const float* base = x + ((size_t)img * C + (live ? c : 0)) * H * W;
  float raw[A];
#pragma unroll
  for (int i = 0; i < A; ++i) {
    const int h = h0 + (ALONG_W ? 0 : i), w = w0 + (ALONG_W ? i : 0);
    const bool ok = live && h >= 0 && h < H && w >= 0 && w < W;
    raw[i] = ok ? __ldg(base + (size_t)h * W + w) : 0.0f;
  }
  float v[A];
  wino1_input_transform(raw, v);
  const size_t plane = (size_t)Cp * Tp;
  float* dst = V + (size_t)c * Tp + t;
#pragma unroll
  for (int xi = 0; xi < A; ++xi) dst[xi * plane] = v[xi];
}

// One thread per (k, t) with k < K, t < T (t fastest: the α loads of a warp are coalesced).
template <int M, int R, bool ALONG_W>
__device__ __forceinline__ void winograd_output_body_1d(const float* __restrict__ Mi, float* __restrict__ y, int K,
                                                        int P, int Q, int tiles_p, int tiles_q, int tiles, int Kp,
                                                        int Tp) {
  constexpr int A = M + R - 1;
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const int k = blockIdx.y;
  if (t >= tiles) return;
  const size_t plane = (size_t)Kp * Tp;
  const float* src = Mi + (size_t)k * Tp + t;
  float mm[A], out[M];
#pragma unroll
  for (int f = 0; f < A; ++f) mm[f] = __ldg(src + f * plane);
  wino1_output_transform(mm, out);
  const int tq = t % tiles_q, tp = (t / tiles_q) % tiles_p, img = t / (tiles_q * tiles_p);
  float* dst = y + ((size_t)img * K + k) * P * Q;
#pragma unroll
  for (int i = 0; i < M; ++i) {
    const int p = ALONG_W ? tp : tp * M + i, q = ALONG_W ? tq * M + i : tq;
    if (p < P && q < Q) dst[(size_t)p * Q + q] = out[i];
  }
}

// U = G g, one thread per (c, k) of the padded Cp × Kp plane, k fastest (coalesced α stores); products and sums
// in double, rounded to float once; G (A × R) from the launcher's generated wrapper.
template <int A, int R>
__device__ __forceinline__ void winograd_filter_body_1d(const float* __restrict__ w, float* __restrict__ U, int C,
                                                        int K, int Cp, int Kp, const double (&G)[A][R]) {
  const long long plane = static_cast<long long>(Cp) * Kp;
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= plane) return;
  const int c = static_cast<int>(i / Kp), k = static_cast<int>(i % Kp);
  const bool live = c < C && k < K;
  double g[R];
#pragma unroll
  for (int r = 0; r < R; ++r) g[r] = live ? static_cast<double>(w[(static_cast<size_t>(k) * C + c) * R + r]) : 0.0;
#pragma unroll
  for (int a = 0; a < A; ++a) {
    double u = 0.0;
#pragma unroll
    for (int r = 0; r < R; ++r) u += G[a][r] * g[r];
    U[static_cast<size_t>(a) * plane + i] = static_cast<float>(u);
  }
}

}  // namespace convtune
