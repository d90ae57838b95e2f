// convtune-arch: sm_90a   (wgmma assembles only for the arch-specific Hopper target)
//
// 1x1 convolution forward (stride 1, no padding) for 16-bit storage on Hopper's warpgroup MMA, persistent, with the
// block's filter rows resident in shared memory. The GEMM is igemm_wgmma_half_1x1.cu's (per image
// Y_n (K x HW) = W (K x C) . X_n (C x HW); A = the packed filters (K, Cp), K-major; B = x straight from NCHW,
// N-major, imm-trans-b = 1; fp32 accumulation, y rounded once):
//
//   y[n,k,p] = sum_c w[k,c] * x[n,c,p]
//
// Why a second kernel: on small-C layers (C <= ~512) a block of the first one runs only Cp/64 chunks, so every block
// pays the pipeline's fill and its epilogue unhidden, and re-reads its BM x Cp filter rows (the yolov3 52x52 head:
// 676 blocks, 4 chunks each, 44 MB of filter reads against 11 MB of x). Here gridDim.x blocks (about one per SM) walk
// the pixel tiles blockIdx.x, blockIdx.x + gridDim.x, ...; the block's filter rows m0 .. m0 + BM (all Cp channels,
// NCH = Cp / 64 chunks of BM 128-byte swizzled rows) are copied once; x flows through a ring of STAGES stages that
// runs across tiles, so the copies of the next tile's first chunks are in flight during a tile's epilogue.
//
// Shared memory: [filters: NCH x BM x 128 B][ring: STAGES x BN x 128 B][staged tile: BM x (BN + 8) x 2 B][BN pixel
// offsets x 8 B]; the B stage layout and the descriptors are igemm_wgmma_half_1x1.cu's. The epilogue stages the tile
// in shared memory like that kernel's, then stores PIX pixels of one output channel per thread (16 or 8 bytes, where
// that kernel stores 4). Per-thread copy offsets are computed once and a tile's pixel base once per tile (32-bit
// division), because profiling the first version on the yolov3 head showed it issue-bound: ~6x the instructions of
// cuBLASLt's kernel for the same GEMM. No split: the whole reduction is in the block.
#include "igemm_wgmma_half_1x1.cu"
#include "wgmma_half_ss_tb_zd.cuh"

namespace convtune {

template <class T, int BN, int MI, int WG, int STAGES, int PIX, int NCH>
__device__ __forceinline__ void igemm_wgmma_half_1x1_resident_body(const T* __restrict__ x,
                                                                    const T* __restrict__ filt, T* __restrict__ y,
                                                                    int C, int HW, int K, int NP, int Cp,
                                                                    int n_tiles) {
  constexpr int CH = 64;                           // channels per chunk (one 128-byte A row)
  constexpr int THREADS = 128 * WG, BM = 64 * WG * MI;
  constexpr int A_CHUNK = BM * 128;                // bytes of one chunk of the resident filter rows
  constexpr int A_BYTES = NCH * A_CHUNK;
  constexpr int B_BYTES = BN * 128;                // one ring stage: 64 channels x BN pixels
  constexpr int LD = BN + 8;                       // staged tile row (pixels), padded against bank conflicts
  constexpr int TILE_BYTES = BM * LD * 2;
  static_assert(PIX == 8 || PIX == 4, "copies of 8 or 4 pixels");
  constexpr int B_PIECES = BN / PIX;               // copies per channel of a chunk (16 or 8 bytes)
  constexpr int B_COPIES = CH * B_PIECES / THREADS;
  constexpr unsigned SBO = (BN / 64) * 1024;       // bytes between 8-channel groups of B
  static_assert(CH * B_PIECES % THREADS == 0, "B copies fill whole passes");
  static_assert(STAGES >= 3, "one stage computing, one in the tensor cores, one loading");
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned smem0 = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const unsigned sA0 = smem0, sB0 = smem0 + A_BYTES;
  unsigned char* staged = smem_raw + (smem0 - smem_u32(smem_raw)) + A_BYTES + STAGES * B_BYTES;

  const int tid = threadIdx.x, warp = tid >> 5, wg = warp >> 2;
  const int m0 = blockIdx.y * BM;
  const int my_tiles = n_tiles > static_cast<int>(blockIdx.x)
                           ? (n_tiles - 1 - static_cast<int>(blockIdx.x)) / static_cast<int>(gridDim.x) + 1 : 0;
  const int total = my_tiles * NCH;                // this block's chunks, over all its tiles
  if (total == 0) return;

  // The resident filter rows, once: they join the first ring stage's copy group (waited for with it).
  for (int idx = tid; idx < NCH * BM * 8; idx += THREADS) {
    const int ch = idx / (BM * 8), rem = idx - ch * (BM * 8);
    const int row = rem >> 3, c = rem & 7;
    const bool ok = m0 + row < K;
    const T* src = filt + static_cast<long long>(ok ? m0 + row : 0) * Cp + ch * CH + c * 8;
    cp_async16_zfill(sA0 + ch * A_CHUNK + swizzled_piece<128>(row, c), src, ok);
  }

  // This thread's B copies: channel cl_j of a chunk, PIX pixels at piece * PIX of the tile; their shared-memory
  // offsets and channel offsets in x are the same for every chunk and tile (only the tile's pixel base moves).
  const int piece = tid % B_PIECES;
  unsigned b_soff[B_COPIES];
  int b_cl[B_COPIES];
#pragma unroll
  for (int j = 0; j < B_COPIES; ++j) {
    const int cl = tid / B_PIECES + j * (THREADS / B_PIECES);     // channel of the chunk, 0..63
    const int p16 = piece * PIX / 8;                              // the 16-byte piece of 8 pixels
    const int kl = cl & 7, nb = p16 >> 3, pl = p16 & 7;
    b_cl[j] = cl;
    b_soff[j] = (cl >> 3) * SBO + nb * 1024 + kl * 128 + ((pl ^ kl) << 4) + (piece * PIX % 8) * 2;
  }
  // pixel base of the tile the copies fill: recomputed (one 32-bit division: N*H*W < 2^31) when a tile starts
  long long b_base = 0;
  bool b_ok = false;
  auto load_stage = [&](int stage, int it) {      // chunk it of the block's walk: tile it / NCH, chunk it % NCH
    const int i = it / NCH, ch = it - i * NCH;
    if (ch == 0) {
      const int pb = (static_cast<int>(blockIdx.x) + i * static_cast<int>(gridDim.x)) * BN + piece * PIX;
      b_ok = pb < NP;
      const int img = b_ok ? pb / HW : 0;
      b_base = static_cast<long long>(img) * C * HW + (b_ok ? pb - img * HW : 0);
    }
    const unsigned sB = sB0 + stage * B_BYTES;
#pragma unroll
    for (int j = 0; j < B_COPIES; ++j) {
      const int c = ch * CH + b_cl[j];
      const bool ok = b_ok && c < C;
      cp_async_zfill<2 * PIX>(sB + b_soff[j], ok ? x + b_base + static_cast<long long>(c) * HW : x, ok);
    }
  };

  float acc[MI][BN / 2];
  const int lane = tid & 31, wq = warp & 3, g = lane >> 2, t = lane & 3;
  unsigned* tile = reinterpret_cast<unsigned*>(staged);
  long long* pix = reinterpret_cast<long long*>(staged + TILE_BYTES);   // y offset of each pixel group's channel 0
  unsigned short* yb = reinterpret_cast<unsigned short*>(y);

#pragma unroll
  for (int mi = 0; mi < MI; ++mi)   // defined before the first wgmma; a tile's first k-step overwrites them (scale-d 0)
#pragma unroll
    for (int j = 0; j < BN / 2; ++j) acc[mi][j] = 0.0f;
#pragma unroll
  for (int s = 0; s < STAGES - 2; ++s) {
    if (s < total) load_stage(s, s);
    cp_async_commit();
  }
  // Tiles outer, a tile's chunks inner (the wgmma_pipeline shape: one wgmma group in flight across the inner loop's
  // back edge, none across the outer one), the copy ring indexed by the block's running chunk count it.
  for (int i = 0, it = 0; i < my_tiles; ++i) {
    for (int ch = 0; ch < NCH; ++ch, ++it) {
      cp_async_wait<STAGES - 3>();
      fence_proxy_async();  // the copies' words, read next by the tensor cores (async proxy)
      __syncthreads();      // chunk it landed; every warpgroup retired chunk it - 2 (its stage is reloaded below)
      wgmma_fence();
      const unsigned sA = sA0 + ch * A_CHUNK + wg * (BM / WG) * 128, sB = sB0 + (it % STAGES) * B_BYTES;
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)    // k16 steps: 32 bytes across A's rows, two 8-channel groups of B
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)   // a tile's first k-step overwrites the accumulators (scale-d 0)
          WgmmaSSTransBScaleD<T, BN>::run(acc[mi], swizzled_desc<128>(sA + mi * 64 * 128, ks),
                                          nmajor_desc(sB + ks * 2 * SBO, SBO), (ch | ks) != 0);
      wgmma_commit();
      const int next = it + STAGES - 2;
      if (next < total) load_stage(next % STAGES, next);
      cp_async_commit();
      wgmma_wait<1>();
    }
    // Epilogue of tile blockIdx.x + i * gridDim.x, while the next tile's first copies are in flight. The staged
    // tile is free: every thread passed at least one loop-top barrier since it last read it.
    wgmma_wait<0>();
    const int p0 = (static_cast<int>(blockIdx.x) + i * static_cast<int>(gridDim.x)) * BN;
    for (int q = tid; q < BN / PIX; q += THREADS) {   // one division per PIX-pixel group of the tile
      const int p = p0 + q * PIX;
      const int img = p < NP ? p / HW : 0;
      pix[q] = p < NP ? static_cast<long long>(img) * K * HW + (p - img * HW) : -1;
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
    // PIX consecutive pixels of one output channel per store (16 or 8 bytes, aligned: H*W % PIX == 0 and tiles
    // start at multiples of BN), consecutive threads along the channel's pixels
    constexpr int GROUPS = BN / PIX;
    const int kmax = min(BM, K - m0);
    for (int idx = tid; idx < kmax * GROUPS; idx += THREADS) {
      const int rl = idx / GROUPS, q = idx - rl * GROUPS;
      const long long base = pix[q];
      if (base < 0) continue;
      unsigned short* dst = yb + base + static_cast<long long>(m0 + rl) * HW;
      const unsigned* src = tile + ((rl * LD + q * PIX) >> 1);
      if constexpr (PIX == 8) {
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
      } else {
        *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(src);
      }
    }
  }
  cp_async_wait<0>();   // nothing is left in flight (the last groups are empty); leave no copy behind the exit
}

}  // namespace convtune
