// Implicit-GEMM convolution forward on tensor cores: TF32 products, fp32 accumulation, fp32 NCHW in and out.
//
//   y[n,k,p,q] = sum_{c,r,s} x[n, c, p*SH - PH + r*DH, q*SW - PW + s*DW] * w[k, c, r, s]   (zero outside x)
//
// The GEMM: M = N*P*Q output pixels (m = n*P*Q + p*Q + q, all images), N_gemm = K output channels, the reduction
// index kr = c*R*S + r*S + s over C*R*S. A[m][kr] is gathered from x on the fly (nothing is materialised),
// B[kr][k] is the direct family's packed weights wpk (C, R, S, Kp): output channels contiguous, zero past K.
//
// A block owns BM pixels x BN channels and walks its slice of the reduction in chunks of BK, staged in shared
// memory by cp.async STAGES deep (the multistage pipeline of CUTLASS's sm80 kernels):
//   As[BK][BM + 8]  pixels contiguous: a warp's copies of one row read consecutive q of one input row;
//   Bs[BK][BN + 8]  16-byte copies of wpk rows.
// The +8 pad makes the fragment reads conflict-free: lane (g = lane/4, t = lane%4) reads row t (or t + 4),
// column g: bank (8t + g) mod 32 is distinct over the warp whenever BM, BN are multiples of 32.
// WM x WN warps; a warp owns a (BM/WM) x (BN/WN) tile of mma.sync.m16n8k8 TF32 tiles (MI x NI of them), with the
// fragment layouts of the PTX ISA (A row-major 16x8: a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4); B
// column-major 8x8: b0 (t, g), b1 (t+4, g); C 16x8: c0,c1 (g, 2t..2t+1), c2,c3 (g+8, 2t..2t+1)). Operands are
// rounded to TF32 (cvt.rna, as cuBLAS and cuDNN round) when read from shared memory.
//
// The gather: each thread copies a fixed pixel column of As (its m, hence n, p, q, fixed for the whole block) and
// BK*BM/THREADS rows of it per chunk. kr -> (c, r, s) by multiply-high with host-computed magic numbers
// (floor(kr / RS) = umulhi(kr, rs_magic), exact for kr * RS < 2^32: the plan checks it; divisor 1 is the identity). Padding taps and the
// ragged edges (m >= M, kr >= C*R*S, k >= Kp) are zero-filled copies that read nothing (cp.async src-size 0).
// With gridDim.z > 1 the reduction is split across blocks and each adds its tile into y with atomics (y zeroed
// first): small maps with many channels have too few tiles to fill the GPU.
#include "common.cuh"

namespace convtune {

__device__ __forceinline__ unsigned to_tf32(float v) {
  unsigned out;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(out) : "f"(v));
  return out;
}

__device__ __forceinline__ void mma_tf32_16x8x8(float* d, const unsigned* a, const unsigned* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES>
__device__ __forceinline__ void igemm_fwd_body(const float* __restrict__ x, const float* __restrict__ wpk,
                                               float* __restrict__ y, int N, int C, int H, int W, int K, int Kp,
                                               int P, int Q, int R, int S, int SH, int SW, int PH, int PW, int DH,
                                               int DW, unsigned rs_magic, unsigned s_magic, int chunks_per_split) {
  constexpr int THREADS = WM * WN * 32;
  constexpr int WTM = BM / WM, WTN = BN / WN;      // warp tile
  constexpr int MI = WTM / 16, NI = WTN / 8;       // mma tiles per warp
  constexpr int LDA = BM + 8, LDB = BN + 8;        // padded shared-memory rows (floats)
  constexpr int A_STAGE = BK * LDA, B_STAGE = BK * LDB, STAGE = A_STAGE + B_STAGE;
  constexpr int A_COPIES = BK * BM / THREADS;      // 4-byte copies of the A tile per thread and chunk
  constexpr int MPT = BM > THREADS ? BM / THREADS : 1;  // pixel columns one thread copies
  constexpr int B_SEGS = BK * BN / 4;              // 16-byte copies of the B tile per chunk
  constexpr int NB = (B_SEGS + THREADS - 1) / THREADS;
  static_assert(BM % 32 == 0 && BN % 32 == 0, "tiles: multiples of 32 (conflict-free fragment reads)");
  static_assert(WTM % 16 == 0 && WTN % 8 == 0, "warp tile: multiples of the 16 x 8 mma tile");
  static_assert(BK % 8 == 0, "chunk: multiples of the mma's k = 8");
  static_assert(THREADS % BM == 0 || BM % THREADS == 0, "pixel columns map onto threads");
  static_assert(A_COPIES >= 1 && (BK * BM) % THREADS == 0, "every thread copies whole A rows");
  static_assert(STAGES >= 2 && STAGES <= 5, "2..5 pipeline stages");
  extern __shared__ __align__(16) float smem[];

  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int wm0 = (warp % WM) * WTM, wn0 = (warp / WM) * WTN;
  const int PQ = P * Q, RS = R * S, HW = H * W;
  const int M = N * PQ;
  const int KR = C * RS;
  const int m0 = blockIdx.x * BM;
  const int n0 = blockIdx.y * BN;

  // This thread's pixel column(s) of As: input row/col origin and image offset, fixed for the block.
  constexpr int COL_STEP = THREADS >= BM ? 0 : THREADS;
  int a_hb[MPT], a_wb[MPT], a_xoff[MPT];
#pragma unroll
  for (int j = 0; j < MPT; ++j) {
    const int mm = (THREADS >= BM ? tid % BM : tid) + j * COL_STEP;
    const int m = m0 + mm;
    if (m < M) {
      const int n = m / PQ, pq = m - n * PQ;
      const int p = pq / Q, q = pq - p * Q;
      a_hb[j] = p * SH - PH;
      a_wb[j] = q * SW - PW;
      a_xoff[j] = n * C * HW;
    } else {  // past the last pixel: every tap reads as padding
      a_hb[j] = -(1 << 29);
      a_wb[j] = 0;
      a_xoff[j] = 0;
    }
  }
  const int a_col0 = THREADS >= BM ? tid % BM : tid;
  const int a_row0 = THREADS >= BM ? tid / BM : 0;
  constexpr int ROW_STEP = THREADS >= BM ? THREADS / BM : 1;

  const int chunk0 = blockIdx.z * chunks_per_split;
  const int nchunks = min((KR + BK - 1) / BK - chunk0, chunks_per_split);
  if (nchunks <= 0) return;

  auto load_stage = [&](int slot, int chunk) {
    float* As = smem + slot * STAGE;
    float* Bs = As + A_STAGE;
    const int kr0 = (chunk0 + chunk) * BK;
#pragma unroll
    for (int i = 0; i < A_COPIES; ++i) {
      const int j = THREADS >= BM ? 0 : i % MPT;            // which pixel column
      const int row = a_row0 + (THREADS >= BM ? i : i / MPT) * ROW_STEP;
      const int kr = kr0 + row;
      // a divisor of 1 has no 32-bit magic number (2^32 + 1): its quotient is the dividend (a uniform branch)
      const unsigned c = RS == 1 ? static_cast<unsigned>(kr) : __umulhi(static_cast<unsigned>(kr), rs_magic);
      const int rs = kr - static_cast<int>(c) * RS;
      const unsigned r = S == 1 ? static_cast<unsigned>(rs) : __umulhi(static_cast<unsigned>(rs), s_magic);
      const int s = rs - static_cast<int>(r) * S;
      const int h = a_hb[j] + static_cast<int>(r) * DH;
      const int w = a_wb[j] + s * DW;
      const bool ok = kr < KR && static_cast<unsigned>(h) < static_cast<unsigned>(H) &&
                      static_cast<unsigned>(w) < static_cast<unsigned>(W);
      const float* src = ok ? x + a_xoff[j] + static_cast<int>(c) * HW + h * W + w : x;
      cp_async4(As + row * LDA + a_col0 + j * COL_STEP, src, ok);
    }
#pragma unroll
    for (int i = 0; i < NB; ++i) {
      const int e = tid + i * THREADS;
      if (B_SEGS % THREADS == 0 || e < B_SEGS) {
        const int row = e / (BN / 4);
        const int col = (e - row * (BN / 4)) * 4;
        const int kr = kr0 + row;
        const bool ok = kr < KR && n0 + col < Kp;
        const float* src = ok ? wpk + static_cast<long long>(kr) * Kp + n0 + col : wpk;
        cp_async16(Bs + row * LDB + col, src, ok);
      }
    }
  };

  float acc[MI][NI][4];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int v = 0; v < 4; ++v) acc[mi][ni][v] = 0.0f;

#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < nchunks) load_stage(st, st);
    cp_async_commit();
  }
  for (int it = 0; it < nchunks; ++it) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();  // chunk `it` landed for every thread; everyone is done with the slot refilled below
    const int next = it + STAGES - 1;
    if (next < nchunks) load_stage(next % STAGES, next);
    cp_async_commit();
    const float* As = smem + (it % STAGES) * STAGE;
    const float* Bs = As + A_STAGE;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 8) {
      unsigned a[MI][4], b[NI][2];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        const float* ap = As + (kk + t4) * LDA + wm0 + mi * 16 + g;
        a[mi][0] = to_tf32(ap[0]);
        a[mi][1] = to_tf32(ap[8]);
        a[mi][2] = to_tf32(ap[4 * LDA]);
        a[mi][3] = to_tf32(ap[4 * LDA + 8]);
      }
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const float* bp = Bs + (kk + t4) * LDB + wn0 + ni * 8 + g;
        b[ni][0] = to_tf32(bp[0]);
        b[ni][1] = to_tf32(bp[4 * LDB]);
      }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) mma_tf32_16x8x8(acc[mi][ni], a[mi], b[ni]);
    }
  }
  cp_async_wait<0>();

  // Epilogue: c0,c1 at (row g, cols 2t, 2t+1), c2,c3 at row g + 8; y[n][k][pq], 8 consecutive pixels per store.
  const bool atomic = gridDim.z > 1;
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int m = m0 + wm0 + mi * 16 + g + half * 8;
      if (m >= M) continue;
      const int n = m / PQ, pq = m - n * PQ;
      float* yrow = y + static_cast<long long>(n) * K * PQ + pq;
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
#pragma unroll
        for (int v = 0; v < 2; ++v) {
          const int k = n0 + wn0 + ni * 8 + 2 * t4 + v;
          if (k < K) {
            const float val = acc[mi][ni][half * 2 + v];
            if (atomic)
              atomicAdd(yrow + static_cast<long long>(k) * PQ, val);
            else
              yrow[static_cast<long long>(k) * PQ] = val;
          }
        }
      }
    }
  }
}

}  // namespace convtune
