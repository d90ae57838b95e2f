// Pointwise (1x1) convolution forward, fp32, NCHW, pad 0, any stride: one GEMM over every output pixel.
//
//   y[n,k,p,q] = sum_c x[n, c, p*SH, q*SW] * w[k, c]
//
// The direct family tiles pixels inside one image (TH x TW), which leaves most of a tile idle on 7x7 and
// 14x14 maps. Here the GEMM's M dimension is the flattened output pixel index m = n*P*Q + p*Q + q (all
// images), N is the output channel k, the reduction is c. A block owns BM pixels x BN channels and walks
// its slice of the input channels in chunks of BK, staged in shared memory with cp.async STAGES deep:
//   As[BK][BM]  pixels contiguous (x rows of one channel),  Bs[BK][BN]  from wpk[c][Kp] (the direct
//   family's packed weights for R = S = 1: output channels contiguous, zero past K).
// Each thread accumulates an 8 x 8 register tile, split as two 4-wide groups on each axis (m: tm*4 and
// tm*4 + BM/2; k: tn*4 and tn*4 + BN/2) so that a warp's float4 reads of As and Bs are conflict-free.
// VEC = 4 copies 16-byte pixel segments (stride 1, P*Q % 4 == 0: a segment never crosses an image);
// VEC = 1 copies single pixels (strided layers, odd maps). With splits > 1 (gridDim.z) each block reduces
// one slice of the input channels and adds its tile into y with atomics (y zeroed first): small maps with
// many channels (7x7, C = 2048) have too few BM x BN tiles to fill the GPU.
#include "common.cuh"

namespace convtune {

// m / PQ for a flattened pixel index m >= 0: 32-bit unsigned division whenever m fits (every realistic layer),
// a 64-bit one otherwise. The epilogue of a map whose P*Q is not a multiple of 4 (1x1 maps of squeeze-excitation
// layers, 7x7, 13x13) divided once per stored element, 64 per thread (106 division sites in the PTX, 10 now).
__device__ __forceinline__ long long pixel_image(long long m, int PQ) {
  return m <= 0x7fffffffLL ? static_cast<long long>(static_cast<unsigned>(m) / static_cast<unsigned>(PQ)) : m / PQ;
}

template <int BM, int BN, int BK, int STAGES, int VEC, int SH, int SW>
__device__ __forceinline__ void pointwise_fwd_body(const float* __restrict__ x, const float* __restrict__ wpk,
                                                   float* __restrict__ y, int N, int C, int H, int W, int K,
                                                   int Kp, int P, int Q, int chunks_per_split) {
  constexpr int TM = 8, TN = 8;
  constexpr int THREADS = (BM / TM) * (BN / TN);
  constexpr int A_STAGE = BK * BM, B_STAGE = BK * BN, STAGE = A_STAGE + B_STAGE;
  constexpr int A_ELEMS = BK * BM / VEC;          // copies of the A tile per chunk
  constexpr int NA = (A_ELEMS + THREADS - 1) / THREADS;
  constexpr int B_SEGS = BK * BN / 4;             // 16-byte copies of the B tile per chunk
  constexpr int NB = (B_SEGS + THREADS - 1) / THREADS;
  static_assert(BM % 8 == 0 && BN % 8 == 0, "8 x 8 thread tiles");
  static_assert(THREADS >= 32 && THREADS <= 512, "threads per block");
  static_assert(VEC == 1 || VEC == 4, "copy width: 1 or 4 floats");
  static_assert(STAGES >= 2 && STAGES <= 4, "2..4 pipeline stages");
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x;
  const int PQ = P * Q;
  const long long M = static_cast<long long>(N) * PQ;
  const long long m0 = static_cast<long long>(blockIdx.x) * BM;
  const int k0 = blockIdx.y * BN;
  const long long HW = static_cast<long long>(H) * W;
  const long long CHW = static_cast<long long>(C) * HW;

  // Fixed copy duties: this thread's pixel(s) of the A tile and its 16-byte segment(s) of the B tile.
  long long a_goff[NA];
  int a_soff[NA], a_kk[NA];
  bool a_ok[NA];
#pragma unroll
  for (int i = 0; i < NA; ++i) {
    const int e = tid + i * THREADS;
    const int kk = e / (BM / VEC);
    const int mm = (e - kk * (BM / VEC)) * VEC;
    const long long m = m0 + mm;
    a_kk[i] = kk;
    a_ok[i] = e < A_ELEMS && m < M;
    const long long n = a_ok[i] ? pixel_image(m, PQ) : 0;
    const int pq = a_ok[i] ? static_cast<int>(m - n * PQ) : 0;
    const int p = pq / Q, q = pq - (pq / Q) * Q;
    a_goff[i] = n * CHW + static_cast<long long>(kk) * HW + static_cast<long long>(p) * SH * W + q * SW;
    a_soff[i] = kk * BM + mm;
  }
  int b_kk[NB], b_col[NB];
#pragma unroll
  for (int i = 0; i < NB; ++i) {
    const int e = tid + i * THREADS;
    b_kk[i] = e / (BN / 4);
    b_col[i] = (e - b_kk[i] * (BN / 4)) * 4;
  }

  const int chunk0 = blockIdx.z * chunks_per_split;
  const int nchunks = min((C + BK - 1) / BK - chunk0, chunks_per_split);
  if (nchunks <= 0) return;
  const bool atomic = gridDim.z > 1;
  auto load_stage = [&](int slot, int chunk) {
    float* As = smem + slot * STAGE;
    float* Bs = As + A_STAGE;
    const int c0 = (chunk0 + chunk) * BK;
#pragma unroll
    for (int i = 0; i < NA; ++i) {
      if (NA * THREADS == A_ELEMS || tid + i * THREADS < A_ELEMS) {
        const bool ok = a_ok[i] && c0 + a_kk[i] < C;
        const float* src = ok ? x + a_goff[i] + static_cast<long long>(c0) * HW : x;
        if constexpr (VEC == 4) {
          cp_async16(As + a_soff[i], src, ok);
        } else {
          cp_async4(As + a_soff[i], src, ok);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < NB; ++i) {
      if (NB * THREADS == B_SEGS || tid + i * THREADS < B_SEGS) {
        const int c = c0 + b_kk[i];
        const int k = k0 + b_col[i];
        const bool ok = c < C && k < Kp;
        cp_async16(Bs + b_kk[i] * BN + b_col[i], ok ? wpk + static_cast<long long>(c) * Kp + k : wpk, ok);
      }
    }
  };

  const int tm = tid % (BM / TM);
  const int tn = tid / (BM / TM);
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

  auto compute_stage = [&](int slot) {
    const float* As = smem + slot * STAGE;
    const float* Bs = As + A_STAGE;
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      const float4 a0 = *reinterpret_cast<const float4*>(As + kk * BM + tm * 4);
      const float4 a1 = *reinterpret_cast<const float4*>(As + kk * BM + tm * 4 + BM / 2);
      const float4 b0 = *reinterpret_cast<const float4*>(Bs + kk * BN + tn * 4);
      const float4 b1 = *reinterpret_cast<const float4*>(Bs + kk * BN + tn * 4 + BN / 2);
      const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
  };

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < nchunks) load_stage(s, s);
    cp_async_commit();
  }
  for (int chunk = 0; chunk < nchunks; ++chunk) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int next = chunk + STAGES - 1;
    if (next < nchunks) load_stage(next % STAGES, next);
    cp_async_commit();
    compute_stage(chunk % STAGES);
  }

  // Epilogue: rows i of the tile are pixels m0 + tm*4 + (i%4) + (i/4)*BM/2, columns j are channels
  // k0 + tn*4 + (j%4) + (j/4)*BN/2. Four consecutive pixels share an image when PQ % 4 == 0 (float4 store);
  // otherwise each of the four pixels' y offset n*K*PQ + pq is found once per group, stepping pq across image
  // boundaries (one division per group, none per element).
  const long long KPQ = static_cast<long long>(K) * PQ;
#pragma unroll
  for (int g = 0; g < 2; ++g) {
    const long long mb = m0 + tm * 4 + g * (BM / 2);
    if (mb >= M) continue;
    const long long nb = pixel_image(mb, PQ);
    const int pqb = static_cast<int>(mb - nb * PQ);
    const bool vec = !atomic && (PQ % 4 == 0) && mb + 3 < M;
    long long pix[4];  // y offset of pixel mb + i at channel 0
    {
      long long n = nb;
      int pq = pqb;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        pix[i] = n * KPQ + pq;
        if (++pq == PQ) pq = 0, ++n;
      }
    }
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int k = k0 + tn * 4 + (j % 4) + (j / 4) * (BN / 2);
      if (k >= K) continue;
      if (vec) {
        float* dst = y + (nb * K + k) * PQ + pqb;
        *reinterpret_cast<float4*>(dst) =
            make_float4(acc[g * 4 + 0][j], acc[g * 4 + 1][j], acc[g * 4 + 2][j], acc[g * 4 + 3][j]);
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          if (mb + i < M) {
            float* dst = y + pix[i] + static_cast<long long>(k) * PQ;
            if (atomic) {
              atomicAdd(dst, acc[g * 4 + i][j]);
            } else {
              *dst = acc[g * 4 + i][j];
            }
          }
        }
      }
    }
  }
}

}  // namespace convtune
