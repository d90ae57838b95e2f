// convtune-arch: sm_90a   (wgmma and the TMA assemble only for the arch-specific Hopper target)
//
// 1x1 convolution forward (stride 1, no padding) for 16-bit storage on Hopper's warpgroup MMA, persistent, filters
// resident, fed by the Tensor Memory Accelerator from a producer warpgroup. The GEMM is igemm_wgmma_half_1x1.cu's (per
// image Y_n (K x HW) = W (K x C) . X_n (C x HW); A = the packed filters (K, Cp), K-major; B = x straight from NCHW,
// N-major, imm-trans-b = 1; fp32 accumulation, y rounded once):
//
//   y[n,k,p] = sum_c w[k,c] * x[n,c,p]      (C a multiple of 64, H*W a multiple of 8)
//
// Why a third persistent kernel: Nsight Compute on the resident kernel (igemm_wgmma_half_1x1_resident.cu) at the
// yolov3 52x52 head shows 2 warps a scheduler with no eligible warp 61% of cycles, DRAM at 23-32% of peak: every
// consumer thread issues its own copies, waits for them (cp.async.wait_group) and meets the whole block at a barrier
// once a chunk, so a chunk's copies are issued only after an earlier chunk's MMAs were. Here one producer thread
// issues one TMA box a chunk, up to STAGES chunks ahead of the MMAs and across tiles and epilogues; the consumer
// warpgroups wait on the stage's mbarrier only (no copy instruction, no block-wide barrier in the main loop), as the
// general TMA GEMM (igemm_wgmma_tma.cuh) does.
//
// Walk: pixel tiles never straddle two images (a TMA box is one image's rows): image n's H*W pixels are TPI =
// ceil(HW / BN) tiles, tile t = n * TPI + j covers pixels j*BN .. j*BN + BN - 1 of image n (those >= HW: zero-filled
// by the TMA, never stored). Blocks walk tiles blockIdx.x, blockIdx.x + gridDim.x, ...; grid.y the row tiles m0.
//
// Maps (encoded on the host, passed by value): map_x over x as (N*C rows, HW inner), boxes of 64 channels x 64
// pixels (one image: C % 64 == 0), 128-byte swizzle: box b of a tile (pixels j*BN + 64 b ..) lands at b * 8 KB of
// the stage, channel c's 64 pixels in one 128-byte row (the N-major atom of igemm_wgmma_half_1x1.cu with the 64-pixel
// blocks 8 KB apart: leading offset 8192 B, stride offset 1024 B between 8-channel groups); map_f over the packed
// filters (K rows, Cp inner), boxes of BM rows x 64 channels (rows >= K zero-filled), 128-byte swizzle: the K-major
// rows of the other kernels.
//
// Shared memory: [filters: NCH x BM x 128 B][ring: STAGES x BN x 128 B][staged tile: BM x (BN + 8) x 2 B]
// [mbarriers: full[STAGES], empty[STAGES], filters]. 128 * (WG + 1) threads: warpgroup 0 the producer, 1..WG the
// consumers (each BM / WG rows of the tile). Epilogue: the resident kernel's (the tile staged in shared memory,
// 16-byte stores of 8 pixels of one channel), synchronised on named barrier 1 among the consumers only.
#include "igemm_wgmma_half_1x1.cu"
#include "wgmma_half_ss_tb_zd.cuh"

namespace convtune {

// Matrix descriptor of an N-major tile of 128-byte-swizzled 8 x 64 atoms at `addr` (1024-byte aligned) whose 64-pixel
// blocks are `lbo` bytes apart (one TMA box each) and 8-channel groups `sbo` bytes apart; layout type 1.
__device__ __forceinline__ unsigned long long nmajor_desc_lbo(unsigned addr, unsigned lbo, unsigned sbo) {
  return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) | (static_cast<unsigned long long>(lbo >> 4) << 16) |
         (static_cast<unsigned long long>(sbo >> 4) << 32) | (1ull << 62);
}

template <class T, int BN, int MI, int WG, int STAGES, int NCH>
__device__ __forceinline__ void igemm_wgmma_half_1x1_tma_body(const TmaDesc* map_x, const TmaDesc* map_f,
                                                               T* __restrict__ y, int C, int HW, int K, int TPI,
                                                               int n_tiles) {
  constexpr int CH = 64;                           // channels per chunk (one 128-byte row of A and of a B box)
  constexpr int CTHREADS = 128 * WG, BM = 64 * WG * MI;
  constexpr int A_CHUNK = BM * 128;                // bytes of one chunk of the resident filter rows
  constexpr int A_BYTES = NCH * A_CHUNK;
  constexpr int BOX_BYTES = 64 * 128;              // one x box: 64 channels x 64 pixels
  constexpr int B_BYTES = BN * 128;                // one ring stage: BN / 64 boxes
  constexpr int LD = BN + 8;                       // staged tile row (pixels), padded against bank conflicts
  constexpr int TILE_BYTES = BM * LD * 2;
  constexpr int PIX = 8;                           // pixels per store (16 bytes; H*W % 8 == 0)
  constexpr unsigned SBO = 1024;                   // bytes between 8-channel groups of a box
  static_assert(BN % 64 == 0 && BN <= 256, "whole 64-pixel boxes");
  static_assert(BM <= 256, "a TMA box holds at most 256 rows");
  static_assert(STAGES >= 2 && 2 * STAGES + 1 <= 16, "the barriers' 128 bytes");
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned smem0 = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const unsigned sA0 = smem0, sB0 = smem0 + A_BYTES;
  unsigned char* staged = smem_raw + (smem0 - smem_u32(smem_raw)) + A_BYTES + STAGES * B_BYTES;
  const unsigned full0 = smem0 + A_BYTES + STAGES * B_BYTES + TILE_BYTES;   // mbarriers [s] at + 8 s
  const unsigned empty0 = full0 + 8 * STAGES, filt_bar = empty0 + 8 * STAGES;

  const int tid = threadIdx.x, warp = tid >> 5;
  const int m0 = blockIdx.y * BM;
  const int my_tiles = n_tiles > static_cast<int>(blockIdx.x)
                           ? (n_tiles - 1 - static_cast<int>(blockIdx.x)) / static_cast<int>(gridDim.x) + 1 : 0;

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full0 + 8 * s, 1);           // the producer's expect_tx (the box bytes complete the phase)
      mbar_init(empty0 + 8 * s, CTHREADS);   // every consumer thread done with the chunk
    }
    mbar_init(filt_bar, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (my_tiles == 0) return;

  if (warp < 4) {   // ---- the producer ------------------------------------------------------------------------------
    regs_dec<TMA_PRODUCER_REGS>();
    if (tid == 0) {
      mbar_expect_tx(filt_bar, A_BYTES);
#pragma unroll
      for (int ch = 0; ch < NCH; ++ch) tma_tile_2d(sA0 + ch * A_CHUNK, map_f, ch * CH, m0, filt_bar);
      for (int i = 0, it = 0; i < my_tiles; ++i) {
        const int t = static_cast<int>(blockIdx.x) + i * static_cast<int>(gridDim.x);
        const int img = t / TPI, px = (t - img * TPI) * BN;
        for (int ch = 0; ch < NCH; ++ch, ++it) {
          const int s = it % STAGES;
          mbar_wait(empty0 + 8 * s, ((it / STAGES) & 1) ^ 1);   // the first pass finds every stage free
          const unsigned full = full0 + 8 * s, sB = sB0 + s * B_BYTES;
          mbar_expect_tx(full, B_BYTES);
#pragma unroll
          for (int b = 0; b < BN / 64; ++b) tma_tile_2d(sB + b * BOX_BYTES, map_x, px + 64 * b, img * C + ch * CH, full);
        }
      }
    }
    return;
  }

  // ---- the consumers: the MMAs and the epilogue ---------------------------------------------------------------------
  regs_inc<TMA_CONSUMER_REGS>();
  const int ctid = tid - 128, cwarp = ctid >> 5, wg = cwarp >> 2;
  const int lane = ctid & 31, wq = cwarp & 3, g = lane >> 2, t4 = lane & 3;
  float acc[MI][BN / 2];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)   // defined before the first wgmma; a tile's first k-step overwrites them (scale-d 0)
#pragma unroll
    for (int j = 0; j < BN / 2; ++j) acc[mi][j] = 0.0f;
  unsigned* tile = reinterpret_cast<unsigned*>(staged);
  unsigned short* yb = reinterpret_cast<unsigned short*>(y);
  auto consumers_sync = [] { asm volatile("bar.sync 1, %0;\n" ::"n"(CTHREADS) : "memory"); };

  mbar_wait(filt_bar, 0);   // the resident filter rows landed (async proxy writes, acquired by the wait)
  for (int i = 0, it = 0; i < my_tiles; ++i) {
    for (int ch = 0; ch < NCH; ++ch, ++it) {
      const int s = it % STAGES;
      mbar_wait(full0 + 8 * s, (it / STAGES) & 1);
      wgmma_fence();
      const unsigned sA = sA0 + ch * A_CHUNK + wg * (BM / WG) * 128, sB = sB0 + s * B_BYTES;
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)    // k16 steps: 32 bytes across A's rows, two 8-channel groups of B
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
          WgmmaSSTransBScaleD<T, BN>::run(acc[mi], swizzled_desc<128>(sA + mi * 64 * 128, ks),
                                          nmajor_desc_lbo(sB + ks * 2 * SBO, BOX_BYTES, SBO), (ch | ks) != 0);
      wgmma_commit();
      wgmma_wait<1>();                                                  // chunk it - 1 retired
      if (ch > 0) mbar_arrive(empty0 + 8 * ((it - 1) % STAGES));        // its stage goes back to the producer
    }
    wgmma_wait<0>();
    mbar_arrive(empty0 + 8 * ((it - 1) % STAGES));                      // the tile's last chunk, retired
    // Epilogue of tile t (image img, pixels px ..), while the producer fills the ring with the next tile's chunks.
    const int t = static_cast<int>(blockIdx.x) + i * static_cast<int>(gridDim.x);
    const int img = t / TPI, px = (t - img * TPI) * BN;
    consumers_sync();   // every consumer finished storing the previous tile out of the staged tile
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int e2 = 0; e2 < 2; ++e2)
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
          tile[((wg * (BM / WG) + mi * 64 + wq * 16 + g + 8 * e2) * LD + 8 * j + 2 * t4) >> 1] =
              static_cast<unsigned>(round_to<T>(acc[mi][j * 4 + 2 * e2]).bits) |
              (static_cast<unsigned>(round_to<T>(acc[mi][j * 4 + 2 * e2 + 1]).bits) << 16);
    consumers_sync();
    // PIX consecutive pixels of one output channel per store (16 bytes, aligned: H*W % 8 == 0 and tiles start at
    // multiples of BN within the image), consecutive threads along the channel's pixels; pixels >= HW are not stored
    constexpr int GROUPS = BN / PIX;
    const int kmax = min(BM, K - m0), groups = min(GROUPS, (HW - px) / PIX);
    unsigned short* ybase = yb + (static_cast<long long>(img) * K + m0) * HW + px;
    for (int idx = ctid; idx < kmax * GROUPS; idx += CTHREADS) {
      const int rl = idx / GROUPS, q = idx - rl * GROUPS;
      if (q >= groups) continue;
      *reinterpret_cast<uint4*>(ybase + static_cast<long long>(rl) * HW + q * PIX) =
          *reinterpret_cast<const uint4*>(tile + ((rl * LD + q * PIX) >> 1));
    }
  }
}

}  // namespace convtune
