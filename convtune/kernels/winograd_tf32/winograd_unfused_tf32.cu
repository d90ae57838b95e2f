// Unfused Winograd F(m×m, 3×3) forward in the TF32 class (family winograd_unfused_tf32): the fp32 path's input,
// filter and output transforms (winograd_unfused.cu, included unchanged, so that family keeps its version) with the
// α² batched GEMMs on tensor cores, mma.sync.m16n8k8 TF32 with fp32 accumulation:
//
//   M[ξ][k][t] = Σ_c U[ξ][c][k] · V[ξ][c][t]     U (α², Cp, Kp), V (α², Cp, Tp), M (α², Kp, Tp), fp32 in memory,
//
// Cp a multiple of BC, Kp of BK, Tp of BT (the plan pads them; V and U are zero in the padding), so the body is a
// drop-in for winograd_gemm_body. Only the products are TF32: each operand is rounded to nearest (cvt.rna) as it
// leaves shared memory — the rounding cuDNN's TF32 GEMMs apply; the transforms stay fp32.
//
// Block tile BK (k, the MMA's M) × BT (t, its N) over chunks of BC channels (its K), STAGES-deep cp.async pipeline
// of 16-byte copies (rows of U and V are contiguous along k and t). WK × WT warps, each a (BK/WK) × (BT/WT) warp
// tile of m16n8 MMAs. Shared rows are padded to BK + 8 / BT + 8 words (≡ 8 mod 32), so the fragment loads — lane
// (g, t4) reads row c0 + t4 (+4) at column m0 + g (+8) — fall in 32 distinct banks. Fragments (PTX m16n8k8 tf32):
//   a0 = A[g][t4], a1 = A[g+8][t4], a2 = A[g][t4+4], a3 = A[g+8][t4+4]   with A[m][c] = U[c][k0 + m]
//   b0 = B[t4][g], b1 = B[t4+4][g]                                       with B[c][n] = V[c][t0 + n]
//   c0, c1 = C[g][2t4, 2t4+1], c2, c3 = C[g+8][2t4, 2t4+1]              stored as float2 into M rows k, k + 8.
//
// PRODUCTS = 3 (3xTF32, the strict-fp32 family winograd_unfused_3xtf32): each operand v is split into two
// TF32 words, hi = rna(v) and lo = rna(v − hi), and a·b is accumulated as lo_a·hi_b + hi_a·lo_b + hi_a·hi_b (small
// terms first; lo_a·lo_b, ~2⁻²² relative, is dropped), which keeps fp32-level accuracy on the TF32 tensor cores.
#include "winograd_unfused.cu"

namespace convtune {

__device__ __forceinline__ unsigned tf32_rna(float v) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
  return r;
}

// hi = rna(v) (the MMA reads only its TF32 bits); with PRODUCTS == 3 also lo = rna(v − hi), hi's low 13 bits
// masked off first (cvt leaves them unspecified)
template <int PRODUCTS>
__device__ __forceinline__ void tf32_split(float v, unsigned& hi, unsigned& lo) {
  hi = tf32_rna(v);
  if constexpr (PRODUCTS == 3) lo = tf32_rna(v - __uint_as_float(hi & 0xffffe000u));
}

__device__ __forceinline__ void mma_m16n8k8_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <int BK, int BT, int BC>
struct WinogradTcStage {
  static constexpr int LDA = BK + 8, LDB = BT + 8;                 // padded rows (words)
  static constexpr int A_FLOATS = BC * LDA, B_FLOATS = BC * LDB;
  static constexpr int FLOATS = A_FLOATS + B_FLOATS;
};

// One pipeline stage's copies: BC rows (channels c0..) of U[ξ] from column k0 (Ug: BK words a row) and of V[ξ] from
// tile t0 (Vg: BT words), 16-byte cp.async copies into the stage's padded rows.
template <int BK, int BT, int BC, int THREADS>
__device__ __forceinline__ void winograd_tc_copy_stage(float* stage, const float* __restrict__ Ug,
                                                       const float* __restrict__ Vg, int c0, int Kp, int Tp, int tid) {
  using S = WinogradTcStage<BK, BT, BC>;
  float* as = stage;
  float* bs = stage + S::A_FLOATS;
#pragma unroll
  for (int idx = tid; idx < BC * BK / 4; idx += THREADS) {
    const int cc = idx / (BK / 4), kk = 4 * (idx % (BK / 4));
    cp_async16(as + cc * S::LDA + kk, Ug + static_cast<size_t>(c0 + cc) * Kp + kk, true);
  }
#pragma unroll
  for (int idx = tid; idx < BC * BT / 4; idx += THREADS) {
    const int cc = idx / (BT / 4), tt = 4 * (idx % (BT / 4));
    cp_async16(bs + cc * S::LDB + tt, Vg + static_cast<size_t>(c0 + cc) * Tp + tt, true);
  }
}

// One stage's MMAs into a warp's MI × NI m16n8 accumulators: ``as`` / ``bs`` point at the warp's first k row / t
// column of the stage's U and V rows, offset by the lane's g; PRODUCTS TF32 products a term (1, or 3xTF32's 3).
template <int BK, int BT, int BC, int MI, int NI, int PRODUCTS>
__device__ __forceinline__ void winograd_tc_stage_mma(float (&acc)[MI][NI][4], const float* as, const float* bs,
                                                      int t4) {
  using S = WinogradTcStage<BK, BT, BC>;
#pragma unroll
  for (int kk = 0; kk < BC; kk += 8) {
    unsigned a[MI][4], b[NI][2], al[MI][4], bl[NI][2];   // al, bl: the lo words (PRODUCTS == 3 only)
#pragma unroll
    for (int i = 0; i < MI; ++i) {
      const float* ap = as + (kk + t4) * S::LDA + 16 * i;
      tf32_split<PRODUCTS>(ap[0], a[i][0], al[i][0]);
      tf32_split<PRODUCTS>(ap[8], a[i][1], al[i][1]);
      tf32_split<PRODUCTS>(ap[4 * S::LDA], a[i][2], al[i][2]);
      tf32_split<PRODUCTS>(ap[4 * S::LDA + 8], a[i][3], al[i][3]);
    }
#pragma unroll
    for (int j = 0; j < NI; ++j) {
      const float* bp = bs + (kk + t4) * S::LDB + 8 * j;
      tf32_split<PRODUCTS>(bp[0], b[j][0], bl[j][0]);
      tf32_split<PRODUCTS>(bp[4 * S::LDB], b[j][1], bl[j][1]);
    }
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int j = 0; j < NI; ++j) {
        if constexpr (PRODUCTS == 3) {
          mma_m16n8k8_tf32(acc[i][j], al[i], b[j]);
          mma_m16n8k8_tf32(acc[i][j], a[i], bl[j]);
        }
        mma_m16n8k8_tf32(acc[i][j], a[i], b[j]);
      }
  }
}

template <int BK, int BT, int BC, int WK, int WT, int STAGES, int PRODUCTS = 1>
__device__ __forceinline__ void winograd_tc_gemm_body(const float* __restrict__ U, const float* __restrict__ V,
                                                      float* __restrict__ Mo, int Cp, int Kp, int Tp) {
  using S = WinogradTcStage<BK, BT, BC>;
  constexpr int THREADS = 32 * WK * WT;
  constexpr int WTK = BK / WK, WTT = BT / WT;                      // warp tile
  constexpr int MI = WTK / 16, NI = WTT / 8;                       // m16 × n8 MMAs per warp and k8 step
  static_assert(BK % 32 == 0 && BT % 32 == 0, "padded rows ≡ 8 (mod 32) words need BK, BT multiples of 32");
  static_assert(BC % 8 == 0, "chunks of whole k8 steps");
  static_assert(WTK % 16 == 0 && WTT % 8 == 0, "warp tiles of whole m16n8 MMAs");
  static_assert(STAGES >= 2 && STAGES <= 4, "2..4 stages");
  static_assert(PRODUCTS == 1 || PRODUCTS == 3, "one TF32 product, or three (3xTF32)");
  extern __shared__ __align__(16) float smem[];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int wk = warp / WT, wt = warp - wk * WT;
  const int xi = blockIdx.z;
  const int t0 = blockIdx.x * BT, k0 = blockIdx.y * BK;
  const float* Ug = U + static_cast<size_t>(xi) * Cp * Kp + k0;
  const float* Vg = V + static_cast<size_t>(xi) * Cp * Tp + t0;
  const int chunks = Cp / BC;

  auto issue = [&](int stage, int chunk) {
    winograd_tc_copy_stage<BK, BT, BC, THREADS>(smem + stage * S::FLOATS, Ug, Vg, chunk * BC, Kp, Tp, tid);
  };

  float acc[MI][NI][4];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

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
    const float* stage = smem + (chunk % STAGES) * S::FLOATS;
    winograd_tc_stage_mma<BK, BT, BC, MI, NI, PRODUCTS>(acc, stage + wk * WTK + g,
                                                        stage + S::A_FLOATS + wt * WTT + g, t4);
  }
  cp_async_wait<0>();

  float* out = Mo + static_cast<size_t>(xi) * Kp * Tp;
#pragma unroll
  for (int i = 0; i < MI; ++i) {
    const int k = k0 + wk * WTK + 16 * i + g;
#pragma unroll
    for (int j = 0; j < NI; ++j) {
      const int t = t0 + wt * WTT + 8 * j + 2 * t4;
      *reinterpret_cast<float2*>(out + static_cast<size_t>(k) * Tp + t) = make_float2(acc[i][j][0], acc[i][j][1]);
      *reinterpret_cast<float2*>(out + static_cast<size_t>(k + 8) * Tp + t) =
          make_float2(acc[i][j][2], acc[i][j][3]);
    }
  }
}

}  // namespace convtune
