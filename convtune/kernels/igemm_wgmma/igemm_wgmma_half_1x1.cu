// convtune-arch: sm_90a   (wgmma assembles only for the arch-specific Hopper target)
//
// 1x1 convolution forward (stride 1, no padding) on Hopper's warpgroup MMA for 16-bit storage, straight from NCHW
// x: no layout change. Per image n, Y_n (K x HW) = W (K x C) . X_n (C x HW):
//
//   y[n,k,p] = sum_c w[k,c] * x[n,c,p]      (p = h*W + w; H*W a multiple of PIX = 8, or of 4 with PIX = 4)
//
// GEMM: M = K output channels (rows; the filters are A, K-major: (K, Cp) rows of the reduction, Cp = roundup(C, 64),
// packed by igemm_wgmma_pack_16 with R = S = 1), N = N*HW pixels (columns; x is B, N-major: a channel's pixels are
// contiguous in NCHW, read by wgmma with imm-trans-b = 1), the reduction over C in chunks of 64 channels.
//
// Shared memory per stage: A as the general kernel's (igemm_wgmma_fwd.cu, included unchanged: BM rows of 128
// bytes, 128-byte swizzle); B as 128-byte-swizzled N-major atoms of 8 channels x 64 pixels (1024 bytes: channel kl's
// 64 pixels in one 128-byte row, 16-byte piece j at j ^ kl), the BN/64 pixel blocks of one 8-channel group side by
// side (leading offset LBO = 1024 B), the 8 channel groups of a chunk SBO = BN/64 * 1024 B apart; a k16 step
// advances B's start by 2 * SBO. A 16-byte copy of B is 8 pixels of one channel (one image: H*W % 8 == 0), zero-
// filled past C or past the last pixel. Epilogue: the tile through shared memory ([BM channels][BN + 8 pixels]), then
// consecutive threads store consecutive pixel pairs of one channel (4 bytes; or, split, fp32 atomics from the
// registers into the workspace, converted afterwards).
#include "igemm_wgmma_fwd.cu"
#include "wgmma_half_ss_tb.cuh"

namespace convtune {

// Matrix descriptor of an N-major tile of 128-byte-swizzled 8 x 64 atoms at `addr` (1024-byte aligned): leading
// offset 1024 B between 64-pixel blocks, stride offset `sbo` bytes between 8-channel groups, layout type 1.
__device__ __forceinline__ unsigned long long nmajor_desc(unsigned addr, unsigned sbo) {
  return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) | (64ull << 16) |
         (static_cast<unsigned long long>(sbo >> 4) << 32) | (1ull << 62);
}

template <class T, int BN, int MI, int WG, int STAGES, int PIX = 8>
__device__ __forceinline__ void igemm_wgmma_half_1x1_body(const T* __restrict__ x, const T* __restrict__ filt,
                                                           T* __restrict__ y, float* __restrict__ ysplit, int C,
                                                           int HW, int K, int NP, int Cp,
                                                           int chunks_per_split) {
  constexpr int CH = 64;                           // channels per chunk (one 128-byte A row)
  constexpr int THREADS = 128 * WG, BM = 64 * WG * MI;
  constexpr int A_BYTES = BM * 128, B_BYTES = BN * 128, STAGE_BYTES = A_BYTES + B_BYTES;
  constexpr int A_ROWS = BM * 8 / THREADS;         // A copies per thread (16 bytes each)
  static_assert(PIX == 8 || PIX == 4, "copies of 8 or 4 pixels");
  constexpr int B_PIECES = BN / PIX;               // copies per channel of a chunk (16 or 8 bytes)
  constexpr int B_COPIES = CH * B_PIECES / THREADS;
  constexpr unsigned SBO = (BN / 64) * 1024;       // bytes between 8-channel groups of B
  static_assert(CH * B_PIECES % THREADS == 0, "B copies fill whole passes");
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned smem0 = (smem_u32(smem_raw) + 1023u) & ~1023u;

  const int tid = threadIdx.x, warp = tid >> 5;
  const long long p0 = static_cast<long long>(blockIdx.x) * BN;   // first pixel (of all images) of the tile
  const int m0 = blockIdx.y * BM;                                  // first output channel
  const int chunks_total = Cp / CH;
  const int chunk0 = blockIdx.z * chunks_per_split;
  const int nchunks = min(chunks_total - chunk0, chunks_per_split);

  // B: this thread's pixel groups (fixed over chunks): global offset of pixel p's channel 0 and whether p exists
  const int piece = tid % B_PIECES;
  long long b_base = 0;
  const long long pb = p0 + piece * PIX;
  const bool b_ok = pb < NP;
  if (b_ok) {
    const long long img = pb / HW;
    b_base = img * C * HW + (pb - img * HW);
  }

  auto load_stage = [&](int stage, int chunk) {
    const unsigned sA = smem0 + stage * STAGE_BYTES, sB = sA + A_BYTES;
    const int kbase = chunk * CH;
#pragma unroll
    for (int j = 0; j < A_ROWS; ++j) {
      const int idx = tid + j * THREADS;
      const int row = idx >> 3, c = idx & 7;
      const bool ok = m0 + row < K;
      const T* src = filt + static_cast<long long>(ok ? m0 + row : 0) * Cp + kbase + c * 8;
      cp_async16_zfill(sA + swizzled_piece<128>(row, c), src, ok);
    }
#pragma unroll
    for (int j = 0; j < B_COPIES; ++j) {
      const int cl = tid / B_PIECES + j * (THREADS / B_PIECES);     // channel of the chunk, 0..63
      const int c = kbase + cl;
      const bool ok = b_ok && c < C;
      const T* src = ok ? x + b_base + static_cast<long long>(c) * HW : x;
      const int p16 = piece * PIX / 8;                              // the 16-byte piece of 8 pixels
      const int kl = cl & 7, nb = p16 >> 3, pl = p16 & 7;
      cp_async_zfill<2 * PIX>(sB + (cl >> 3) * SBO + nb * 1024 + kl * 128 + ((pl ^ kl) << 4) +
                              (piece * PIX % 8) * 2, src, ok);
    }
  };

  float acc[MI][BN / 2];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int j = 0; j < BN / 2; ++j) acc[mi][j] = 0.0f;

  const int wg = warp >> 2;
  wgmma_pipeline<STAGES>(nchunks, chunk0, load_stage, [&](int stage) {
    const unsigned sA = smem0 + stage * STAGE_BYTES + wg * (BM / WG) * 128, sB = smem0 + stage * STAGE_BYTES + A_BYTES;
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)    // k16 steps: 32 bytes across A's rows, two 8-channel groups of B
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
        WgmmaSSTransB<T, BN>::run(acc[mi], swizzled_desc<128>(sA + mi * 64 * 128, ks),
                                  nmajor_desc(sB + ks * 2 * SBO, SBO));
  });

  // accumulator (row = output channel, columns 8j + 2t + e1 = pixels): pixel pairs never straddle an image
  const int lane = tid & 31, wq = warp & 3, g = lane >> 2, t = lane & 3;
  if (gridDim.z > 1) {   // split reduction: fp32 atomics into the workspace, converted by another kernel
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
      for (int e2 = 0; e2 < 2; ++e2) {
        const int k = m0 + wg * (BM / WG) + mi * 64 + wq * 16 + g + 8 * e2;
        if (k >= K) continue;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          const long long p = p0 + 8 * j + 2 * t;
          if (p >= NP) continue;
          const long long img = p / HW;
          const long long at = (img * K + k) * HW + (p - img * HW);
          atomicAdd(ysplit + at, acc[mi][j * 4 + 2 * e2]);
          atomicAdd(ysplit + at + 1, acc[mi][j * 4 + 2 * e2 + 1]);
        }
      }
    }
    return;
  }
  // The tile through shared memory, [BM channels][BN + 8 pixels] in T, then row by row: consecutive threads store
  // consecutive pixel pairs of one output channel (4 bytes each; full 32-byte sectors).
  constexpr int LD = BN + 8;
  static_assert(BM * LD * 2 + BN * 8 <= STAGES * STAGE_BYTES, "the staged tile fits in the pipeline's smem");
  cp_async_wait<0>();
  __syncthreads();              // every warpgroup's MMAs retired (wait_group 0 above), no copy in flight
  unsigned char* staged = smem_raw + (smem0 - smem_u32(smem_raw));
  unsigned* tile = reinterpret_cast<unsigned*>(staged);
  long long* pix = reinterpret_cast<long long*>(staged + BM * LD * 2);   // y offset of each pixel's channel 0
  for (int i = tid; i < BN; i += THREADS) {   // one division per pixel of the tile, not one per store
    const long long p = p0 + i;
    const long long img = p / HW;
    pix[i] = p < NP ? img * K * HW + (p - img * HW) : 0;
  }
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int e2 = 0; e2 < 2; ++e2)
#pragma unroll
      for (int j = 0; j < BN / 8; ++j)
        tile[((wg * (BM / WG) + mi * 64 + wq * 16 + g + 8 * e2) * LD + 8 * j + 2 * t) >> 1] =
            static_cast<unsigned>(round_to<T>(acc[mi][j * 4 + 2 * e2]).bits) |
            (static_cast<unsigned>(round_to<T>(acc[mi][j * 4 + 2 * e2 + 1]).bits) << 16);
  __syncthreads();
  unsigned short* yb = reinterpret_cast<unsigned short*>(y);
  for (int idx = tid; idx < BM * (BN / 2); idx += THREADS) {
    const int rl = idx / (BN / 2), pr = idx - rl * (BN / 2);
    const int k = m0 + rl;
    const long long p = p0 + 2 * pr;
    if (k >= K || p >= NP) continue;
    *reinterpret_cast<unsigned*>(yb + pix[2 * pr] + static_cast<long long>(k) * HW) = tile[(rl * LD + 2 * pr) >> 1];
  }
}

}  // namespace convtune
