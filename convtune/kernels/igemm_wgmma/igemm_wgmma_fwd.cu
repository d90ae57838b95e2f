// convtune-arch: sm_90a   (wgmma assembles only for the arch-specific Hopper target)
//
// Implicit-GEMM convolution forward on Hopper's warpgroup MMA (wgmma), one kernel template for every class: T =
// convtune::wg_tf32 (float32 in and out, TF32 products, wgmma m64nNk8), wg_bf16 / wg_f16 (16-bit in and out, products
// exact, y rounded once, m64nNk16); fp32 accumulation throughout (wgmma_storage.cuh).
//
//   y[n,k,p,q] = sum_{c,r,s} x[n, c, p*SH - PH + r*DH, q*SW - PW + s*DW] * w[k, c, r, s]   (zero outside x)
//
// GEMM: M = N*P*Q output pixels (rows) x K output channels (columns), the reduction over (r, s, c) in chunks of CH
// channels of one tap: one swizzled shared-memory row of CHB = 128, 64 or 32 bytes, CH = CHB / sizeof(T) (TF32: 32,
// 16, 8; 16-bit: 64, 32, 16), Cp = roundup(C, CH) channels per tap, KRp = R*S*Cp. Small chunks serve small C.
//
// Folded taps (FQ > 0, for stems: C <= FQ channels per pixel in the workspace, S*FQ <= CH; a pixel's tap is one
// copy of FQ*sizeof(T) = 4, 8 or 16 bytes): a chunk is one filter row r, its row holding the S taps side by side,
// column s*FQ + c (columns >= S*FQ zero in the filters and in the shared-memory tiles, zeroed once). Cp = FQ,
// KRp = R*CH, R chunks. A 7x7 stem with C = 3 computes 7 chunks of 32 columns (21 used) instead of 49 chunks.
//
// Shared memory: STAGES stages of [A: BM rows x CHB][B: BN rows x CHB], 1024-byte aligned, K-major with the CHB-byte
// swizzle, which is the layout the matrix descriptors name (wgmma_common.cuh); a k-step is 32 bytes of a row (the
// descriptor's start advanced by 32 B). Copies: 16-byte zero-filling cp.async (a tap in the padding reads nothing).
// Compute: WG warpgroups split the BM rows, each issues MI m64nBN wgmma per k-step with A and B from shared memory;
// the tensor cores are given chunk it before the copies of chunk it + STAGES - 2 are issued (wgmma_pipeline). Kernels:
//   igemm_wgmma_to_nhwc      TF32: x (N, C, H, W) -> xt (N, H, W, Cp), TF32-rounded, zero for c >= C;
//   igemm_wgmma_to_nhwc_16   16-bit: the same layout change, no rounding (4-byte accesses of two pixels / two
//                            channels where H*W is even);
//   igemm_wgmma_to_nhwc_fold  folded: x -> xt (N, H, W, FQ), one thread per pixel (C loads, one 4/8/16-byte store);
//   igemm_wgmma_pack         w (K, C, R, S) -> filt (K, KRp), filt[k][(r*S + s)*Cp + c] = operand(w[k][c][r][s])
//                            (folded: filt[k][r*CH + s*FQ + c]), zero elsewhere; once per weight tensor;
//   igemm_wgmma_fwd          the GEMM: y (N, K, P, Q) in T through a shared-memory staging of the tile (coalesced
//                            NCHW rows), or with gridDim.z > 1 (split reduction) fp32 atomics into ysplit, zeroed
//                            first (TF32: y itself; 16-bit: a workspace of y's shape, converted by
//                            igemm_wgmma_f32_to_16).
#include "wgmma_common.cuh"
#include "wgmma_storage.cuh"
#include "wgmma_tf32_ss.cuh"
#include "wgmma_half_ss.cuh"
#include "wgmma_epilogue.cuh"
#include "igemm_wgmma_tma.cuh"

namespace convtune {

// TF32: one block per (image, 32 channels, 32 pixels), 256 threads: x (N, C, HW) -> xt (N, HW, Cp), TF32-rounded,
// zero channels >= C (Cp a multiple of 8; the grid covers ceil(Cp / 32) channel blocks).
__device__ __forceinline__ void igemm_wgmma_to_nhwc_body(const float* __restrict__ x, float* __restrict__ xt, int C,
                                                         int HW, int Cp) {
  __shared__ float tile[32][33];
  const int img = blockIdx.z, c0 = blockIdx.y * 32, p0 = blockIdx.x * 32;
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;  // 256 threads: 8 rows per pass
  const float* xs = x + static_cast<long long>(img) * C * HW;
#pragma unroll
  for (int i = ty; i < 32; i += 8) {
    const int c = c0 + i, p = p0 + tx;
    tile[i][tx] = (c < C && p < HW) ? __ldg(xs + static_cast<long long>(c) * HW + p) : 0.0f;
  }
  __syncthreads();
  unsigned* xd = reinterpret_cast<unsigned*>(xt) + static_cast<long long>(img) * HW * Cp;
#pragma unroll
  for (int i = ty; i < 32; i += 8) {
    const int p = p0 + i, c = c0 + tx;
    if (p < HW && c < Cp) xd[static_cast<long long>(p) * Cp + c] = operand_bits<wg_tf32>(__float_as_uint(tile[tx][i]));
  }
}

// 16-bit: one block per (image, 32 channels, 64 pixels), 256 threads: x (N, C, HW) -> xt (N, HW, Cp), zero channels
// >= C.
// Reads: a warp per channel row, a lane per pixel pair (one 4-byte load where HW is even: rows start at even
// elements); writes: a half-warp per pixel, a lane per channel pair (one 4-byte store; Cp is even).
template <class T>
__device__ __forceinline__ void igemm_wgmma_to_nhwc_16_body(const T* __restrict__ x, T* __restrict__ xt, int C,
                                                            int HW, int Cp) {
  __shared__ unsigned short tile[32][66];   // [channel][pixel]; 66: the write phase's column reads hit 16 banks
  const int img = blockIdx.z, c0 = blockIdx.y * 32, p0 = blockIdx.x * 64;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned short* xs = reinterpret_cast<const unsigned short*>(x) + static_cast<long long>(img) * C * HW;
  const bool even = (HW & 1) == 0;
#pragma unroll
  for (int i = warp; i < 32; i += 8) {
    const int c = c0 + i, p = p0 + 2 * lane;
    unsigned short a = 0, b = 0;
    if (c < C) {
      const unsigned short* row = xs + static_cast<long long>(c) * HW;
      if (even && p + 1 < HW) {
        const unsigned v = __ldg(reinterpret_cast<const unsigned*>(row + p));
        a = static_cast<unsigned short>(v & 0xFFFFu);
        b = static_cast<unsigned short>(v >> 16);
      } else {
        if (p < HW) a = row[p];
        if (p + 1 < HW) b = row[p + 1];
      }
    }
    tile[i][2 * lane] = a;
    tile[i][2 * lane + 1] = b;
  }
  __syncthreads();
  unsigned* xd = reinterpret_cast<unsigned*>(reinterpret_cast<unsigned short*>(xt) +
                                             static_cast<long long>(img) * HW * Cp);
  const int j = lane & 15;                    // channel pair c0 + 2j, c0 + 2j + 1
#pragma unroll
  for (int i = warp * 2 + (lane >> 4); i < 64; i += 16) {
    const int p = p0 + i, c = c0 + 2 * j;
    if (p < HW && c < Cp)
      xd[(static_cast<long long>(p) * Cp + c) >> 1] = static_cast<unsigned>(tile[2 * j][i]) |
                                                      (static_cast<unsigned>(tile[2 * j + 1][i]) << 16);
  }
}

// Folded workspaces: x (N, C, HW) -> xt (N, HW, FQ), operands (TF32-rounded / as stored), zero channels >= C; block
// (256 pixels of image blockIdx.y), a thread per pixel: consecutive threads read consecutive pixels of a channel row,
// then store the pixel's FQ channels at once (4, 8 or 16 bytes; xt rows of FQ*sizeof(T) bytes keep it aligned).
template <class T, int FQ>
__device__ __forceinline__ void igemm_wgmma_to_nhwc_fold_body(const T* __restrict__ x, T* __restrict__ xt, int C,
                                                              int HW) {
  using Bits = decltype(T::bits);
  constexpr int WORDS = FQ * static_cast<int>(sizeof(T)) / 4;   // 4-byte words of a pixel's channels
  static_assert(WORDS == 1 || WORDS == 2 || WORDS == 4, "4, 8 or 16 bytes a pixel");
  const int p = blockIdx.x * blockDim.x + threadIdx.x, img = blockIdx.y;
  if (p >= HW) return;
  const Bits* xs = reinterpret_cast<const Bits*>(x) + static_cast<long long>(img) * C * HW + p;
  auto channel = [&](int c) -> unsigned {
    return c < C ? static_cast<unsigned>(operand_bits<T>(__ldg(xs + static_cast<long long>(c) * HW))) : 0u;
  };
  unsigned v[WORDS];
#pragma unroll
  for (int i = 0; i < WORDS; ++i) {
    if constexpr (sizeof(T) == 4) {
      v[i] = channel(i);
    } else {
      v[i] = channel(2 * i) | (channel(2 * i + 1) << 16);
    }
  }
  T* dst = xt + (static_cast<long long>(img) * HW + p) * FQ;
  if constexpr (WORDS == 1) {
    *reinterpret_cast<unsigned*>(dst) = v[0];
  } else if constexpr (WORDS == 2) {
    *reinterpret_cast<uint2*>(dst) = make_uint2(v[0], v[1]);
  } else {
    *reinterpret_cast<uint4*>(dst) = make_uint4(v[0], v[1], v[2], v[3]);
  }
}

// One thread per element: filt[n][(r*S + s)*Cp + c] = operand(w[n][c][r][s]), zero for c >= C; folded (FQ > 0, rows
// of CH): filt[n][r*CH + s*FQ + c] = operand(w[n][c][r][s]), zero for c >= C and s*FQ + c >= S*FQ.
template <class T, int FQ = 0, int CH = 0>
__device__ __forceinline__ void igemm_wgmma_pack_body(const T* __restrict__ w, T* __restrict__ filt, int K, int C,
                                                         int R, int S, int Cp) {
  const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long KRp = FQ > 0 ? static_cast<long long>(R) * CH : static_cast<long long>(R) * S * Cp;
  if (idx >= K * KRp) return;
  const int n = static_cast<int>(idx / KRp), rest = static_cast<int>(idx % KRp);
  int r, s, c;
  if constexpr (FQ > 0) {
    r = rest / CH;
    s = (rest % CH) / FQ;
    c = (rest % CH) % FQ;
  } else {
    r = (rest / Cp) / S;
    s = (rest / Cp) % S;
    c = rest % Cp;
  }
  T v;
  v.bits = c < C && s < S ? operand_bits<T>(w[((static_cast<long long>(n) * C + c) * R + r) * S + s].bits)
                          : static_cast<decltype(T::bits)>(0);
  filt[idx] = v;
}

// A split problem's fp32 workspace -> y in T (one rounding); n elements, grid-stride.
template <class T>
__device__ __forceinline__ void igemm_wgmma_f32_to_16_body(const float* __restrict__ ws, T* __restrict__ y,
                                                           int n) {
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    y[i] = round_to<T>(ws[i]);
}

// A_NCHW (TF32, 1x1 filters, stride 1, no padding, H*W a multiple of 4): A is x itself, read from NCHW (no layout
// change; Cp then carries x's channel count C): a stage holds [CH channels][BM + 8 pixels] words copied 16 bytes (4
// pixels of one channel) at a time, zero past C and past the last pixel; each k-step's A fragments are read from it
// into registers and rounded to TF32 (wgmma with A in registers: TF32 wgmma reads shared-memory operands K-major only,
// and x's pixels are contiguous per channel). Rows of BM + 8 words: a warp's fragment reads (pixels g, channels t)
// hit 32 distinct banks.
template <class T, int BN, int MI, int WG, int STAGES, int CHB, int FQ = 0, bool A_NCHW = false>
__device__ __forceinline__ void igemm_wgmma_fwd_body(const T* __restrict__ xt, const T* __restrict__ filt,
                                                      T* __restrict__ y, float* __restrict__ ysplit, int N, int Cp,
                                                      int H, int W, int K, int P, int Q, int S, int SH, int SW,
                                                      int PH, int PW, int DH, int DW, int KRp, int chunks_per_split) {
  using Bits = decltype(T::bits);
  constexpr int E = static_cast<int>(sizeof(T));   // bytes per element: 4 (TF32) or 2
  static_assert(CHB == 128 || CHB == 64 || CHB == 32, "rows of 128, 64 or 32 bytes");
  static_assert(FQ == 0 || FQ * E == 4 || FQ * E == 8 || FQ * E == 16, "folded taps: 4, 8 or 16 bytes a pixel");
  constexpr int CH = CHB / E;                  // elements per row: one chunk of one tap (folded: of one filter row)
  constexpr int VEC = 16 / E;                  // elements per 16-byte copy
  // threads per row: 16-byte pieces of the row, or (folded) tap slots, slot j copying taps j, j + 8, ... < S
  constexpr int ROW_PIECES = CHB / 16;         // 16-byte pieces of a row (the filters' copies)
  constexpr int PIECES = FQ > 0 ? 8 : ROW_PIECES;
  constexpr int THREADS = 128 * WG, BM = 64 * WG * MI;
  constexpr int ROWS_PER_PASS = THREADS / PIECES;
  static_assert(!A_NCHW || (E == 4 && CHB == 128 && FQ == 0), "x read from NCHW: TF32, chunks of 32 channels");
  constexpr int LDA = BM + 8;                  // A_NCHW: words per channel row of the A tile
  constexpr int A_BYTES = A_NCHW ? CH * LDA * 4 : BM * CHB, B_BYTES = BN * CHB, STAGE_BYTES = A_BYTES + B_BYTES;
  static_assert(A_BYTES % 1024 == 0, "B tiles stay aligned to the swizzle's period");
  constexpr int A_ROWS = BM / ROWS_PER_PASS;                                  // per thread (BM is a multiple)
  constexpr int B_COPIES = (BN * ROW_PIECES + THREADS - 1) / THREADS;   // per thread, the last maybe partial
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned smem0 = (smem_u32(smem_raw) + 1023u) & ~1023u;

  const int tid = threadIdx.x, warp = tid >> 5;
  const int PQ = P * Q;
  const long long M = static_cast<long long>(N) * PQ;
  const long long m0 = static_cast<long long>(blockIdx.x) * BM;
  const int n0 = blockIdx.y * BN;
  const int cblocks = FQ > 0 ? 1 : Cp / CH;
  const int chunks_total = KRp / CH;
  const int chunk0 = blockIdx.z * chunks_per_split;
  const int nchunks = min(chunks_total - chunk0, chunks_per_split);

  // this thread copies 16-byte piece tid % PIECES (VEC elements; folded: the taps of slot tid % PIECES) of rows
  // tid / PIECES + j * ROWS_PER_PASS
  const int piece = tid % PIECES;
  long long pix_base[A_ROWS];
  int pix_h0[A_ROWS], pix_w0[A_ROWS];
  // A_NCHW: this thread copies pixels 4*pg .. 4*pg + 3 of the tile (one image: H*W is a multiple of 4) of channel rows
  // tid / (BM/4) + j * A_ROW_STEP of each chunk
  constexpr int A_GROUPS = BM / 4, A_ROW_STEP = THREADS / A_GROUPS, A_COPIES = CH / A_ROW_STEP;
  const int pg = tid % A_GROUPS;
  long long a_base = 0;
  bool a_ok = false;
  if constexpr (A_NCHW) {
    const long long p = m0 + 4 * pg;
    a_ok = p < M;
    if (a_ok) {
      const long long img = p / PQ;
      a_base = img * Cp * PQ + (p - img * PQ);
    }
  }
#pragma unroll
  for (int j = 0; j < (A_NCHW ? 0 : A_ROWS); ++j) {
    const long long m = m0 + tid / PIECES + j * ROWS_PER_PASS;
    pix_base[j] = 0;
    pix_h0[j] = -(1 << 29);
    pix_w0[j] = 0;
    if (m < M) {
      const int img = static_cast<int>(m / PQ), pq = static_cast<int>(m % PQ);
      pix_h0[j] = (pq / Q) * SH - PH;
      pix_w0[j] = (pq % Q) * SW - PW;
      pix_base[j] = static_cast<long long>(img) * H * W * Cp + (FQ > 0 ? 0 : piece * VEC);
    }
  }

  auto load_stage = [&](int stage, int chunk) {
    const unsigned sA = smem0 + stage * STAGE_BYTES, sB = sA + A_BYTES;
    if constexpr (A_NCHW) {   // channels chunk*CH ..: 4 pixels of one channel a copy (Cp is x's C here)
#pragma unroll
      for (int j = 0; j < A_COPIES; ++j) {
        const int row = tid / A_GROUPS + j * A_ROW_STEP, c = chunk * CH + row;
        const bool ok = a_ok && c < Cp;
        const T* src = ok ? xt + a_base + static_cast<long long>(c) * PQ : xt;
        cp_async16_zfill(sA + (row * LDA + 4 * pg) * 4, src, ok);
      }
    } else if constexpr (FQ > 0) {   // chunk = filter row r: each pixel's S taps, one copy of FQ channels each
      const int dh = chunk * DH;
#pragma unroll
      for (int j = 0; j < A_ROWS; ++j) {
        const int row = tid / PIECES + j * ROWS_PER_PASS;
        const int h = pix_h0[j] + dh;
        const bool h_ok = static_cast<unsigned>(h) < static_cast<unsigned>(H);
        for (int s = piece; s < S; s += PIECES) {
          const int w = pix_w0[j] + s * DW;
          const bool ok = h_ok && static_cast<unsigned>(w) < static_cast<unsigned>(W);
          const T* src = ok ? xt + pix_base[j] + (static_cast<long long>(h) * W + w) * FQ : xt;
          cp_async_zfill<E * FQ>(sA + swizzled_byte<CHB>(row, s * E * FQ), src, ok);
        }
      }
    } else {
      const int tap = chunk / cblocks, cb = chunk - tap * cblocks;
      const int dh = (tap / S) * DH, dw = (tap % S) * DW;
#pragma unroll
      for (int j = 0; j < A_ROWS; ++j) {
        const int row = tid / PIECES + j * ROWS_PER_PASS;
        const int h = pix_h0[j] + dh, w = pix_w0[j] + dw;
        const bool ok = static_cast<unsigned>(h) < static_cast<unsigned>(H) &&
                        static_cast<unsigned>(w) < static_cast<unsigned>(W);
        const T* src = ok ? xt + pix_base[j] + (static_cast<long long>(h) * W + w) * Cp + cb * CH : xt;
        cp_async16_zfill(sA + swizzled_piece<CHB>(row, piece), src, ok);
      }
    }
    const int kbase = chunk * CH;
#pragma unroll
    for (int j = 0; j < B_COPIES; ++j) {
      const int idx = tid + j * THREADS;
      if ((BN * ROW_PIECES) % THREADS != 0 && idx >= BN * ROW_PIECES) break;
      const int row = idx / ROW_PIECES, c = idx % ROW_PIECES;
      const bool ok = n0 + row < K;
      const T* src = filt + static_cast<long long>(ok ? n0 + row : 0) * KRp + kbase + c * VEC;
      cp_async16_zfill(sB + swizzled_piece<CHB>(row, c), src, ok);
    }
  };

  float acc[MI][BN / 2];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int j = 0; j < BN / 2; ++j) acc[mi][j] = 0.0f;

  if constexpr (FQ > 0) {   // the columns past S*FQ are never copied: zero in every stage, once
    for (int i = tid; i < STAGES * BM * CHB / 16; i += THREADS) {
      const int stage = i / (BM * CHB / 16), rest = i - stage * (BM * CHB / 16);
      asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(smem0 + stage * STAGE_BYTES + rest * 16),
                   "r"(0) : "memory");
    }
    __syncthreads();   // every zero stored before any thread's copies land on the same rows
  }
  const int wg = warp >> 2;
  const int lane = tid & 31, wq = warp & 3, g = lane >> 2, t = lane & 3;
  wgmma_pipeline<STAGES>(nchunks, chunk0, load_stage, [&](int stage) {
    const unsigned sB = smem0 + stage * STAGE_BYTES + A_BYTES;
    if constexpr (A_NCHW) {
      // the chunk before still reads its A registers: retire it, then fragments (pixel rows r0 + g (+8), channels
      // 8ks + t (+4)) rounded to TF32
      wgmma_wait<0>();
      const unsigned sA = smem0 + stage * STAGE_BYTES;
      unsigned a[MI][4][4];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        const int r0 = wg * (BM / WG) + mi * 64 + wq * 16 + g;
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          const unsigned at = sA + ((ks * 8 + t) * LDA + r0) * 4;
          a[mi][ks][0] = operand_bits<wg_tf32>(lds_u32(at));
          a[mi][ks][1] = operand_bits<wg_tf32>(lds_u32(at + 8 * 4));
          a[mi][ks][2] = operand_bits<wg_tf32>(lds_u32(at + 4 * LDA * 4));
          a[mi][ks][3] = operand_bits<wg_tf32>(lds_u32(at + (4 * LDA + 8) * 4));
        }
      }
      wgmma_fence();   // the A registers written, read next by the tensor cores
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) WgmmaRSTf32<BN>::run(acc[mi], a[mi][ks], swizzled_desc<CHB>(sB, ks));
    } else {
      const unsigned sA = smem0 + stage * STAGE_BYTES + wg * (BM / WG) * CHB;
#pragma unroll
      for (int ks = 0; ks < CHB / 32; ++ks)   // k-steps of 32 bytes across the row (k16 16-bit, k8 TF32)
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
          WgmmaSS<T, BN>::run(acc[mi], swizzled_desc<CHB>(sA + mi * 64 * CHB, ks), swizzled_desc<CHB>(sB, ks));
    }
  });

  unsigned char* staged = smem_raw + (smem0 - smem_u32(smem_raw));
  wgmma_store_tile<T, BN, MI, WG, STAGES * STAGE_BYTES>(acc, y, ysplit, staged, m0, n0, M, PQ, K, tid, [] {
    cp_async_wait<0>();   // no copy in flight (the pipeline's last groups are empty)
    __syncthreads();      // every warpgroup's MMAs retired (wait_group 0 in the pipeline)
  });
}

}  // namespace convtune
