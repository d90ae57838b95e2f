// The 16-bit 1x1 implicit-GEMM forward (family igemm_half_1x1): bfloat16 / float16 x (N, C, H, W) and y
// (N, K, H, W), R = S = 1, stride 1, no padding, H*W a multiple of 8; mma.sync.m16n8k16 with fp32 accumulation.
//
// A file of its own that includes igemm_fwd.cu unchanged (the 16-bit product MmaOf<T>, the B stage and fragments,
// the main loop, the epilogue, the conversion and pack kernels): a kernel's version is the hash of its expanded
// source, so the TF32 families and igemm_half keep theirs (and the replay tables measured against them).
//
//   y[n,k,pq] = sum_c x[n, c, pq] * w[k, c]
//
// The GEMM: M = N*H*W pixels (m = n*H*W + pq), K output channels, the reduction over C channels run as KR = C/2
// 32-bit words (word kw = channels 2kw, 2kw + 1; the kernel's C and KR arguments count words, as igemm_half's).
// B is the igemm_pack_16 operand (word pairs in the TF32 fragment order; its gather table is not read here), so
// the B stage, its fragments and the mma loop are the NHWC kernel's over words.
//
// A[m][c] = x[n, c, pq] is contiguous along the pixels, so A moves in 16-byte cp.async copies of 8 pixels straight
// from NCHW x (no layout change, no gather table; the 8 pixels lie in one image as H*W is a multiple of 8).
// As[2*BK][BM + 8] holds a chunk's 2*BK channel rows pixels-contiguous (BK words of each stage, as the geometry of
// the word view's TF32 1x1 plan counts them). Thread tid copies pixel group tid mod (BM/8) of channel rows
// tid / (BM/8) + i * THREADS/(BM/8). ldmatrix.x4.trans reads the m16n8k16 A fragment from channel rows: lane l
// addresses channel row 16kb + l%8 + 8(l/16) at pixel column 8((l/8)%2) of the mi-th 16-pixel tile (matrix j = l/8
// is rows k 8(j/2).., columns m 8(j%2)..; transposed, lane (g, t) receives A(m = g, k = 2t..2t+1) of it: a0..a3
// of the PTX layout). Rows (BM + 8) * 2 bytes apart are (BM/8 + 1) 16-byte units apart, an odd number (BM is a
// multiple of 32), so the 8 rows of a matrix fall in distinct 16-byte bank groups: conflict-free.
#include "igemm_fwd.cu"

namespace convtune {

// ldmatrix.x4.trans: as ldmatrix_x4, each 8 x 8 matrix of 16-bit elements transposed: lane l receives elements
// (2(l%4), l/4) and (2(l%4) + 1, l/4) of each stored matrix (lower half first; the rows are the addresses lanes
// 8j..8j+7 give).
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* row) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// T: bfloat16 or half16. The TF32 1x1 kernel is igemm_1x1_body (igemm_fwd.cu): fp32 rows, no ldmatrix.
template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool PIPE, class T>
__device__ __forceinline__ void igemm_half_1x1_body(const float* __restrict__ xw, const float* __restrict__ filt,
                                                    float* __restrict__ y, int N, int C, int H, int W, int K, int P,
                                                    int Q, int SH, int SW, int PH, int PW, int KR, int KRp, int NB8,
                                                    int chunks_per_split) {
  constexpr int PIX = 8;                           // pixels per 16-byte copy
  constexpr int THREADS = WM * WN * 32;
  constexpr int WTM = BM / WM, WTN = BN / WN;
  constexpr int MI = WTM / 16, NI = WTN / 8;
  constexpr int LDA = BM + 8;                      // elements per A row
  constexpr int A_STAGE = BK * LDA, B_STAGE = BK * BN, STAGE = A_STAGE + B_STAGE;   // in words
  constexpr int GROUPS = BM / PIX;                 // 8-pixel groups of a channel row
  constexpr int ROWS = 2 * BK;                     // channel rows per chunk (2 per word)
  constexpr int A_COPIES = ROWS * GROUPS / THREADS;  // 16-byte A copies per thread and chunk
  constexpr int ROW_STEP = THREADS / GROUPS;       // channel rows between one thread's copies
  static_assert(sizeof(T) == 2 && !is_f32<T>::value, "16-bit storage: bfloat16 or half16");
  static_assert(BM % 32 == 0 && BN % 32 == 0, "tiles: multiples of 32");
  static_assert(WTM % 16 == 0 && WTN % 8 == 0, "warp tile: multiples of the 16 x 8 mma tile");
  static_assert(BK % 8 == 0 && 64 % BK == 0, "chunk: a multiple of the mma's k = 8 words dividing 64 (KRp)");
  static_assert(THREADS % GROUPS == 0 && A_COPIES >= 1 && (ROWS * GROUPS) % THREADS == 0,
                "every thread copies whole 16-byte groups of one pixel column");
  static_assert(STAGES >= 2 && STAGES <= 5, "2..5 pipeline stages");
  extern __shared__ __align__(16) float smem[];
  const T* __restrict__ x = reinterpret_cast<const T*>(xw);
  const int channels = 2 * C;                      // C counts words

  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int slot = t4 * 8 + g;
  const int wm0 = (warp % WM) * WTM, wn0 = (warp / WM) * WTN;
  const int HW = H * W;
  const int M = N * HW;
  const int m0 = blockIdx.x * BM;
  const int n0 = blockIdx.y * BN;

  const int group = tid % GROUPS, row0 = tid / GROUPS;
  const int m = m0 + PIX * group;
  const bool m_ok = m < M;                          // all 8 pixels or none: M and m are multiples of 8
  const int img = m_ok ? m / HW : 0;
  const long long a_base = m_ok ? static_cast<long long>(img) * channels * HW + (m - img * HW) : 0;
  const int a_dst0 = row0 * LDA + PIX * group;

  const int chunk0 = blockIdx.z * chunks_per_split;
  const int nchunks = min((KR + BK - 1) / BK - chunk0, chunks_per_split);
  if (nchunks <= 0) return;

  auto load_stage = [&](int stage_slot, int chunk) {
    T* As = reinterpret_cast<T*>(smem + stage_slot * STAGE);
    float* Bs = smem + stage_slot * STAGE + A_STAGE;
    const int kr0 = (chunk0 + chunk) * BK;          // in words
#pragma unroll
    for (int i = 0; i < A_COPIES; ++i) {
      const int c = 2 * kr0 + row0 + i * ROW_STEP;
      const bool ok = m_ok && c < channels;
      const T* src = ok ? x + a_base + static_cast<long long>(c) * HW : x;
      cp_async16(reinterpret_cast<float*>(As + a_dst0 + i * ROW_STEP * LDA), reinterpret_cast<const float*>(src),
                 ok);
    }
    load_b_stage<BN, BK, THREADS>(Bs, filt, kr0, n0, NB8, tid);
  };

  float acc[MI][NI][4];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int v = 0; v < 4; ++v) acc[mi][ni][v] = 0.0f;

  // ldmatrix rows (see the header): channel row lrow of the k16 step, pixel column lcol of each 16-pixel tile
  const int lrow = (lane & 7) + 8 * (lane >> 4), lcol = 8 * ((lane >> 3) & 1);
  auto load_frags = [&](const float* stage, int kb, unsigned (&a)[MI][4], unsigned (&b)[NI][2]) {
    const T* As = reinterpret_cast<const T*>(stage);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) ldmatrix_x4_trans(a[mi], As + (kb * 16 + lrow) * LDA + wm0 + mi * 16 + lcol);
    load_b_frags<BN, NI>(b, stage + A_STAGE, kb, wn0, slot);
  };
  mainloop<MI, NI, BK / 8, STAGES, STAGE, PIPE, MmaOf<T>>(acc, smem, nchunks, load_stage, load_frags);

  if (gridDim.z > 1)   // a split adds into the fp32 workspace that igemm_f32_to_* converts into y
    store_tile<MI, NI>(acc, y, m0 + wm0, n0 + wn0, M, K, HW, g, t4, true);
  else
    store_tile<MI, NI, T>(acc, reinterpret_cast<T*>(y), m0 + wm0, n0 + wn0, M, K, HW, g, t4, false);
}

}  // namespace convtune
