// Implicit-GEMM convolution forward on the CUDA cores (strict fp32 FMAs), NCHW, any filter, stride, padding and
// dilation: one GEMM over every output pixel of every image, the reduction over (c, r, s).
//
//   y[n,k,p,q] = sum_{c,r,s} x[n, c, p*SH - PH + r*DH, q*SW - PW + s*DW] * w[k, c, r, s]
//
// GEMM view: M = N*P*Q output pixels (m = n*P*Q + p*Q + q), N = K output channels, reduction j = (c*R + r)*S + s
// over CRS = C*R*S rows, the row order of the direct family's packed weights wpk (C, R, S, Kp) (K contiguous,
// zero past K), so both families share one packed filter tensor. A block owns BM pixels x BN channels and walks
// its slice of the CRS rows in chunks of BK, staged in shared memory by cp.async STAGES deep:
//   As[BK][BM]  the im2col rows gathered from x (4-byte copies, zero-filled where a tap meets padding),
//   Bs[BK][BN]  16-byte copies of wpk rows.
// The direct family tiles pixels inside one image and stages an input patch: strided layers waste the patch's
// skipped columns, large filters (7x7, 11x11) and 1xn / nx1 filters make the patch's halo large, small maps leave
// tiles idle. Here nothing is staged that no MAC uses, and tiles span images.
// Copy duties are fixed per thread: copy i of a chunk is element e = tid + i*THREADS of the BK x BM tile, row
// kk = e / BM, pixel mm = e % BM; a warp copies 32 consecutive pixels of one row (coalesced for stride 1, and
// the row's tap decomposition j -> (c, r, s), divisions by compile-time constants, is warp-uniform).
// Each thread accumulates an 8 x 8 register tile, two 4-wide groups on each axis (m: tm*4 and tm*4 + BM/2;
// k: tn*4 and tn*4 + BN/2), so a warp's float4 reads of As and Bs are conflict-free. With splits > 1
// (gridDim.z) each block reduces one slice of the CRS rows and adds its tile into y with atomics (y zeroed
// first). Offsets are 32-bit: the launcher admits x of fewer than 2^31 elements.
#include "common.cuh"

namespace convtune {

template <int BM, int BN, int BK, int STAGES, int R, int S, int SH, int SW, int DH, int DW>
__device__ __forceinline__ void igemm_simt_fwd_body(const float* __restrict__ x, const float* __restrict__ wpk,
                                                    float* __restrict__ y, int N, int C, int H, int W, int K,
                                                    int Kp, int P, int Q, int PH, int PW, int chunks_per_split) {
  constexpr int TM = 8, TN = 8, RS = R * S;
  constexpr int THREADS = (BM / TM) * (BN / TN);
  constexpr int A_STAGE = BK * BM, B_STAGE = BK * BN, STAGE = A_STAGE + B_STAGE;
  constexpr int A_ELEMS = BK * BM;                // 4-byte copies of the A tile per chunk
  constexpr int NA = (A_ELEMS + THREADS - 1) / THREADS;
  constexpr int B_SEGS = BK * BN / 4;             // 16-byte copies of the B tile per chunk
  constexpr int NB = (B_SEGS + THREADS - 1) / THREADS;
  // one pixel per thread when the copy stride is a multiple of the tile's width (e % BM is then tid % BM)
  constexpr bool ONE_PIXEL = THREADS % BM == 0;
  constexpr int NPIX = ONE_PIXEL ? 1 : NA;
  static_assert(BM % 32 == 0 && BN % 8 == 0, "warp-wide pixel rows, 8 x 8 thread tiles");
  static_assert(THREADS >= 32 && THREADS <= 512, "threads per block");
  static_assert(STAGES >= 2 && STAGES <= 4, "2..4 pipeline stages");
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x;
  const int PQ = P * Q;
  const int M = N * PQ;
  const int m0 = blockIdx.x * BM;
  const int k0 = blockIdx.y * BN;
  const int HW = H * W;
  const int CRS = C * RS;

  // This thread's pixel(s): the input offset of the window's corner (p*SH - PH, q*SW - PW), possibly outside
  // the map, and the corner itself for the padding test.
  int pix_off[NPIX], pix_h[NPIX], pix_w[NPIX];
#pragma unroll
  for (int i = 0; i < NPIX; ++i) {
    const int m = m0 + (tid + i * THREADS) % BM;
    const bool ok = m < M;
    const int n = ok ? m / PQ : 0;
    const int pq = ok ? m - n * PQ : 0;
    const int p = pq / Q, q = pq - (pq / Q) * Q;
    // a pixel past M gets a corner no tap can bring inside the map: every copy of it zero-fills
    pix_h[i] = ok ? p * SH - PH : -(1 << 30);
    pix_w[i] = q * SW - PW;
    pix_off[i] = n * C * HW + (p * SH - PH) * W + (q * SW - PW);
  }
  int b_kk[NB], b_col[NB];
#pragma unroll
  for (int i = 0; i < NB; ++i) {
    const int e = tid + i * THREADS;
    b_kk[i] = e / (BN / 4);
    b_col[i] = (e - b_kk[i] * (BN / 4)) * 4;
  }

  const int chunk0 = blockIdx.z * chunks_per_split;
  const int nchunks = min((CRS + BK - 1) / BK - chunk0, chunks_per_split);
  if (nchunks <= 0) return;
  const bool atomic = gridDim.z > 1;
  auto load_stage = [&](int slot, int chunk) {
    float* As = smem + slot * STAGE;
    float* Bs = As + A_STAGE;
    const int j0 = (chunk0 + chunk) * BK;
#pragma unroll
    for (int i = 0; i < NA; ++i) {
      const int e = tid + i * THREADS;
      if (NA * THREADS == A_ELEMS || e < A_ELEMS) {
        const int kk = e / BM;
        const int pi = ONE_PIXEL ? 0 : i;
        const int j = j0 + kk;
        const int c = j / RS;
        const int rs = j - c * RS;
        const int r = rs / S;
        const int s = rs - r * S;
        const int ih = pix_h[pi] + r * DH;
        const int iw = pix_w[pi] + s * DW;
        const bool ok = j < CRS && static_cast<unsigned>(ih) < static_cast<unsigned>(H) &&
                        static_cast<unsigned>(iw) < static_cast<unsigned>(W);
        const float* src = ok ? x + (pix_off[pi] + c * HW + r * DH * W + s * DW) : x;
        cp_async4(As + kk * BM + e % BM, src, ok);
      }
    }
#pragma unroll
    for (int i = 0; i < NB; ++i) {
      if (NB * THREADS == B_SEGS || tid + i * THREADS < B_SEGS) {
        const int j = j0 + b_kk[i];
        const int k = k0 + b_col[i];
        const bool ok = j < CRS && k < Kp;
        cp_async16(Bs + b_kk[i] * BN + b_col[i], ok ? wpk + static_cast<long long>(j) * Kp + k : wpk, ok);
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
  // k0 + tn*4 + (j%4) + (j/4)*BN/2. Four consecutive pixels share an image when PQ % 4 == 0 (float4 store).
#pragma unroll
  for (int g = 0; g < 2; ++g) {
    const int mb = m0 + tm * 4 + g * (BM / 2);
    if (mb >= M) continue;
    const int nb = mb / PQ;
    const int pqb = mb - nb * PQ;
    const bool vec = !atomic && (PQ % 4 == 0) && mb + 3 < M;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int k = k0 + tn * 4 + (j % 4) + (j / 4) * (BN / 2);
      if (k >= K) continue;
      if (vec) {
        float* dst = y + (static_cast<long long>(nb) * K + k) * PQ + pqb;
        *reinterpret_cast<float4*>(dst) =
            make_float4(acc[g * 4 + 0][j], acc[g * 4 + 1][j], acc[g * 4 + 2][j], acc[g * 4 + 3][j]);
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int m = mb + i;
          if (m < M) {
            const int n = m / PQ;
            float* dst = y + (static_cast<long long>(n) * K + k) * PQ + (m - n * PQ);
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
