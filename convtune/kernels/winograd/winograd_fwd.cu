// Fused Winograd F(m×m, 3×3) forward convolution, fp32 NCHW, stride 1, dilation 1, any padding.
//
// A block owns BN output tiles (m×m pixels each; tiles numbered n = (img·tiles_p + tp)·tiles_q + tq) and
// BK output channels, and accumulates all α² Winograd-domain products M[ξ][k][n] = Σ_c U[ξ][c][k]·V[ξ][c][n]
// on chip. Per chunk of BC input channels:
//   1. each thread loads whole α×α input windows (zero outside the image and past C), transforms them in
//      registers (V = Bᵀ d B, generated code) and stores V to shared memory as Vs[ξ][BC][BN];
//   2. the pre-transformed filters U (global, [α²][Cp][Kp], zero-padded) are copied to Us[ξ][BC][BK]
//      with 16-byte cp.async;
//   3. each thread multiplies its TK channels × TN tiles for every ξ (α²·TK·TN accumulators).
// STAGES = 2 double-buffers shared memory: the next chunk's windows are loaded into registers and its
// filters copied before the current chunk is multiplied, and transformed after it.
// The epilogue applies the output transform (Y = Aᵀ M A) in registers and stores the m×m pixels that lie
// inside P×Q. The device functions wino_input_transform / wino_output_transform are prepended by the
// launcher (transforms.py).
#include "common.cuh"

namespace convtune {

template <int M, int BN, int BK, int BC, int TN, int TK, int STAGES>
__device__ __forceinline__ void winograd_fwd_body(const float* __restrict__ x, const float* __restrict__ U,
                                                  float* __restrict__ y, int C, int H, int W, int K, int P,
                                                  int Q, int pad_h, int pad_w, int tiles_p, int tiles_q,
                                                  int tiles, int Cp, int Kp) {
  constexpr int A = M + 2;
  constexpr int AA = A * A;
  constexpr int THREADS = (BN / TN) * (BK / TK);
  constexpr int WINDOWS = BC * BN / THREADS;     // input windows each thread loads per chunk
  constexpr int V_FLOATS = AA * BC * BN;
  constexpr int U_FLOATS = AA * BC * BK;
  constexpr int STAGE_FLOATS = V_FLOATS + U_FLOATS;
  static_assert(BC * BN % THREADS == 0, "BC·BN must be a multiple of the thread count");
  static_assert(BK % 4 == 0, "BK must be a multiple of 4 (16-byte filter copies)");
  extern __shared__ __align__(16) float smem[];

  const int tid = threadIdx.x;
  const int n0 = blockIdx.x * BN;
  const int k0 = blockIdx.y * BK;
  const int chunks = Cp / BC;

  // ---- loading: window w of this thread is (cc, nn) = divmod(tid + w·THREADS, BN) ----
  float raw[WINDOWS][A][A];
  auto load_windows = [&](int chunk) {
#pragma unroll
    for (int w = 0; w < WINDOWS; ++w) {
      const int idx = tid + w * THREADS;
      const int cc = idx / BN, nn = idx % BN;
      const int n = n0 + nn, c = chunk * BC + cc;
      const bool live = n < tiles && c < C;
      int img = 0, tp = 0, tq = 0;
      if (live) {
        tq = n % tiles_q;
        tp = (n / tiles_q) % tiles_p;
        img = n / (tiles_q * tiles_p);
      }
      const int h0 = tp * M - pad_h, w0 = tq * M - pad_w;
      const float* base = x + ((size_t)img * C + (live ? c : 0)) * H * W;
#pragma unroll
      for (int i = 0; i < A; ++i) {
        const bool row_ok = live && h0 + i >= 0 && h0 + i < H;
#pragma unroll
        for (int j = 0; j < A; ++j) {
          const bool ok = row_ok && w0 + j >= 0 && w0 + j < W;
          raw[w][i][j] = ok ? __ldg(base + (size_t)(h0 + i) * W + (w0 + j)) : 0.0f;
        }
      }
    }
  };
  auto store_windows = [&](float* vs) {
#pragma unroll
    for (int w = 0; w < WINDOWS; ++w) {
      const int idx = tid + w * THREADS;
      const int cc = idx / BN, nn = idx % BN;
      float v[A][A];
      wino_input_transform(raw[w], v);
#pragma unroll
      for (int xi = 0; xi < A; ++xi)
#pragma unroll
        for (int nu = 0; nu < A; ++nu) vs[((xi * A + nu) * BC + cc) * BN + nn] = v[xi][nu];
    }
  };
  auto copy_filters = [&](float* us, int chunk) {
    for (int idx = tid; idx < U_FLOATS / 4; idx += THREADS) {
      const int kk4 = idx % (BK / 4);
      const int rest = idx / (BK / 4);
      const int cc = rest % BC, f = rest / BC;
      const float* src = U + ((size_t)f * Cp + chunk * BC + cc) * Kp + k0 + 4 * kk4;
      cp_async16(us + (f * BC + cc) * BK + 4 * kk4, src, true);
    }
    cp_async_commit();
  };

  // ---- multiplying: thread (tk_idx, tn_idx) owns channels k0 + tk_idx·TK + [0, TK) and tiles tn_idx·TN + [0, TN) ----
  const int tn_idx = tid % (BN / TN), tk_idx = tid / (BN / TN);
  float acc[AA][TK][TN];
#pragma unroll
  for (int f = 0; f < AA; ++f)
#pragma unroll
    for (int a = 0; a < TK; ++a)
#pragma unroll
      for (int b = 0; b < TN; ++b) acc[f][a][b] = 0.0f;

  auto multiply = [&](const float* vs, const float* us) {
#pragma unroll 1
    for (int cc = 0; cc < BC; ++cc) {
#pragma unroll
      for (int f = 0; f < AA; ++f) {
        float u[TK], v[TN];
#pragma unroll
        for (int a = 0; a < TK; ++a) u[a] = us[(f * BC + cc) * BK + tk_idx * TK + a];
#pragma unroll
        for (int b = 0; b < TN; ++b) v[b] = vs[(f * BC + cc) * BN + tn_idx * TN + b];
#pragma unroll
        for (int a = 0; a < TK; ++a)
#pragma unroll
          for (int b = 0; b < TN; ++b) acc[f][a][b] = fmaf(u[a], v[b], acc[f][a][b]);
      }
    }
  };

  // ---- main loop ----
  load_windows(0);
  copy_filters(smem + V_FLOATS, 0);
  store_windows(smem);
  cp_async_wait<0>();
  __syncthreads();
  for (int chunk = 0; chunk < chunks; ++chunk) {
    float* cur = smem + (STAGES == 2 ? (chunk & 1) * STAGE_FLOATS : 0);
    const bool more = chunk + 1 < chunks;
    if (STAGES == 2) {
      float* nxt = smem + ((chunk + 1) & 1) * STAGE_FLOATS;
      if (more) {
        load_windows(chunk + 1);
        copy_filters(nxt + V_FLOATS, chunk + 1);
      }
      multiply(cur, cur + V_FLOATS);
      if (more) {
        store_windows(nxt);
        cp_async_wait<0>();
      }
      __syncthreads();
    } else {
      multiply(cur, cur + V_FLOATS);
      if (more) {
        __syncthreads();  // everyone is done reading this chunk
        load_windows(chunk + 1);
        copy_filters(cur + V_FLOATS, chunk + 1);
        store_windows(cur);
        cp_async_wait<0>();
        __syncthreads();
      }
    }
  }

  // ---- epilogue: output transform, store the m×m pixels inside P×Q ----
#pragma unroll
  for (int b = 0; b < TN; ++b) {
    const int n = n0 + tn_idx * TN + b;
    if (n >= tiles) continue;
    const int tq = n % tiles_q, tp = (n / tiles_q) % tiles_p, img = n / (tiles_q * tiles_p);
#pragma unroll
    for (int a = 0; a < TK; ++a) {
      const int k = k0 + tk_idx * TK + a;
      if (k >= K) continue;
      float mm[A][A], out[M][M];
#pragma unroll
      for (int f = 0; f < AA; ++f) mm[f / A][f % A] = acc[f][a][b];
      wino_output_transform(mm, out);
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
  }
}

}  // namespace convtune
