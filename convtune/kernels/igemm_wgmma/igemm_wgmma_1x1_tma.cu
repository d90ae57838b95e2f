// convtune-arch: sm_90a   (wgmma and the TMA assemble only for the arch-specific Hopper target)
//
// 1x1 convolution forward (stride 1, no padding) in TF32 on Hopper's warpgroup MMA, persistent, filters resident, fed
// by the Tensor Memory Accelerator from a producer warpgroup. The GEMM is the TF32 resident kernel's
// (igemm_wgmma_1x1_resident.cu: rows M = pixels, columns the K output channels, the reduction over C in chunks of 32;
// A = x through registers, rounded to TF32 with cvt.rna as cuDNN rounds; B = the packed TF32 filters (K, Cp), K-major,
// 128-byte swizzled rows; fp32 accumulation, y float32):
//
//   y[n,k,p] = sum_c tf32(x[n,c,p]) * tf32(w[k,c])      (C a multiple of 32, H*W a multiple of 4)
//
// Why: the resident kernel's consumer threads issue their own cp.async copies, wait for them and meet the block at a
// barrier once a chunk; at the yolov3 52x52 head it issues every 3.7 cycles with no warp eligible 73% of cycles and
// moves 26% of DRAM's bandwidth (benchmarks/results/igemm_wgmma_h200/six_families_h100/ncu_yolov3_tf32). Here one
// producer thread issues the TMA boxes up to STAGES chunks ahead, across tiles and epilogues, as the 16-bit TMA 1x1
// kernel does (igemm_wgmma_half_1x1_tma.cu: 16.8 -> 14.8 us on that head in bf16); the consumer warpgroups wait on the
// stage's mbarrier, read their A fragments, hand the stage back at once (A lives in registers from then on: the
// stage is free before the MMAs that use it retire) and issue the MMAs.
//
// Walk: pixel tiles never straddle two images (a TMA box is one image's rows): image n's H*W pixels are TPI =
// ceil(HW / BM) tiles, tile t = n * TPI + j covers pixels j*BM .. j*BM + BM - 1 of image n (those >= HW: zero-filled
// by the TMA, never stored). Blocks walk tiles blockIdx.x, blockIdx.x + gridDim.x, ...; grid.y the column tiles n0.
//
// Maps (encoded on the host, passed by value): map_x over x as (N*C rows, HW inner) float32, boxes of 32 pixels
// (128 bytes) x 32 channels with the 128-byte swizzle: box b of a stage (pixels 32 b .. 32 b + 31 of the tile) lands
// at b * 4 KB, channel c's 32 pixels in one 128-byte row whose 16-byte pieces are permuted by c % 8; map_f over the
// packed filters (K rows, Cp inner), boxes of BN rows x 32 channels (rows >= K zero-filled), 128-byte swizzle: the
// K-major B tiles of the resident kernel.
//
// A fragments (wgmma m64nNk8 TF32, A in registers): thread (g, t) of warp wq holds pixels r0 = wq*16 + g and r0 + 8
// of its warpgroup's 64 rows, channels 8ks + t and 8ks + t + 4. Pixel r of channel c sits at byte
//   (r / 32) * 4096 + c * 128 + (((r % 32) / 4) ^ (c % 8)) * 16 + (r % 4) * 4
// of the stage: a warp's 32 loads meet 16 banks (2-way), which the chunk's MMAs hide (16 loads a thread a chunk).
//
// Shared memory: [filters: NCH x BN x 128 B][ring: STAGES x BM x 128 B][mbarriers: full[STAGES], empty[STAGES],
// filters]. 128 * (WG + 1) threads: warpgroup 0 the producer, 1..WG the consumers (each BM / WG pixel rows). The
// epilogue stores from the accumulators straight to NCHW y: each store instruction writes 8 consecutive pixels (32
// bytes, one sector where H*W % 8 == 0) of 4 output channels, so no staged tile takes shared memory and the ring and
// the filters keep it (the head's 128 filter rows x 256 channels with a 128-pixel tile).
#include "igemm_wgmma_1x1_resident.cu"

namespace convtune {

template <int BN, int MI, int WG, int STAGES, int NCH>
__device__ __forceinline__ void igemm_wgmma_1x1_tma_body(const TmaDesc* map_x, const TmaDesc* map_f,
                                                          float* __restrict__ y, int C, int HW, int K, int TPI,
                                                          int n_tiles) {
  constexpr int CH = 32;                           // channels per chunk (one 128-byte filter row of TF32 words)
  constexpr int CTHREADS = 128 * WG, BM = 64 * WG * MI;
  constexpr int B_CHUNK = BN * 128;                // bytes of one chunk of the resident filter rows
  constexpr int B_BYTES = NCH * B_CHUNK;
  constexpr int BOX_PIXELS = 32, BOX_BYTES = CH * 128;   // one x box: 32 channels x 32 pixels
  constexpr int A_BYTES = BM * 128;                // one ring stage: BM / 32 boxes
  static_assert(BN % 64 == 0 && BN <= 256, "a TMA box holds at most 256 filter rows");
  static_assert(STAGES >= 2 && 2 * STAGES + 1 <= 16, "the barriers' 128 bytes");
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned smem0 = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const unsigned sB0 = smem0, sA0 = smem0 + B_BYTES;
  const unsigned full0 = smem0 + B_BYTES + STAGES * A_BYTES;   // mbarriers [s] at + 8 s
  const unsigned empty0 = full0 + 8 * STAGES, filt_bar = empty0 + 8 * STAGES;

  const int tid = threadIdx.x, warp = tid >> 5;
  const int n0 = blockIdx.y * BN;
  const int my_tiles = n_tiles > static_cast<int>(blockIdx.x)
                           ? (n_tiles - 1 - static_cast<int>(blockIdx.x)) / static_cast<int>(gridDim.x) + 1 : 0;

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full0 + 8 * s, 1);           // the producer's expect_tx (the box bytes complete the phase)
      mbar_init(empty0 + 8 * s, CTHREADS);   // every consumer thread read its fragments of the chunk
    }
    mbar_init(filt_bar, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (my_tiles == 0) return;

  if (warp < 4) {   // ---- the producer ------------------------------------------------------------------------------
    regs_dec<TMA_PRODUCER_REGS>();
    if (tid == 0) {
      mbar_expect_tx(filt_bar, B_BYTES);
#pragma unroll
      for (int ch = 0; ch < NCH; ++ch) tma_tile_2d(sB0 + ch * B_CHUNK, map_f, ch * CH, n0, filt_bar);
      for (int i = 0, it = 0; i < my_tiles; ++i) {
        const int t = static_cast<int>(blockIdx.x) + i * static_cast<int>(gridDim.x);
        const int img = t / TPI, px = (t - img * TPI) * BM;
        for (int ch = 0; ch < NCH; ++ch, ++it) {
          const int s = it % STAGES;
          mbar_wait(empty0 + 8 * s, ((it / STAGES) & 1) ^ 1);   // the first pass finds every stage free
          const unsigned full = full0 + 8 * s, sA = sA0 + s * A_BYTES;
          mbar_expect_tx(full, A_BYTES);
#pragma unroll
          for (int b = 0; b < BM / BOX_PIXELS; ++b)
            tma_tile_2d(sA + b * BOX_BYTES, map_x, px + BOX_PIXELS * b, img * C + ch * CH, full);
        }
      }
    }
    return;
  }

  // ---- the consumers: fragments, MMAs, stores -----------------------------------------------------------------------
  regs_inc<TMA_CONSUMER_REGS>();
  const int ctid = tid - 128, cwarp = ctid >> 5, wg = cwarp >> 2;
  const int lane = ctid & 31, wq = cwarp & 3, g = lane >> 2, t4 = lane & 3;
  float acc[MI][BN / 2];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)   // defined before the first wgmma; a tile's first k-step overwrites them (scale-d 0)
#pragma unroll
    for (int j = 0; j < BN / 2; ++j) acc[mi][j] = 0.0f;

  // One chunk (chunk ch of the block's running chunk it): fragments into `a` (the wgmma that read `a` last, two
  // chunks back, retired at the end of the step before), the stage back to the producer, the MMAs.
  auto step = [&](unsigned (&a)[MI][4][4], int it, int ch) {
    const int s = it % STAGES;
    mbar_wait(full0 + 8 * s, (it / STAGES) & 1);
    const unsigned sA = sA0 + s * A_BYTES;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const int r0 = wg * (BM / WG) + mi * 64 + wq * 16 + g;   // r0 % 4 == g % 4; r0 + 8 the same box
      const unsigned row0 = sA + (r0 / BOX_PIXELS) * BOX_BYTES + (r0 % 4) * 4;
      const int piece0 = (r0 % BOX_PIXELS) / 4, piece8 = piece0 + 2;
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {   // rows r0 (+8), channels 8ks + t4 (+4), rounded to TF32
        const int c = ks * 8 + t4;       // c % 8 == t4; c + 4: t4 + 4
        const unsigned lo = row0 + c * 128, hi = lo + 4 * 128;
        a[mi][ks][0] = operand_bits<wg_tf32>(lds_u32(lo + ((piece0 ^ t4) << 4)));
        a[mi][ks][1] = operand_bits<wg_tf32>(lds_u32(lo + ((piece8 ^ t4) << 4)));
        a[mi][ks][2] = operand_bits<wg_tf32>(lds_u32(hi + ((piece0 ^ (t4 + 4)) << 4)));
        a[mi][ks][3] = operand_bits<wg_tf32>(lds_u32(hi + ((piece8 ^ (t4 + 4)) << 4)));
#pragma unroll
        for (int e = 0; e < 4; ++e) pin(a[mi][ks][e]);
      }
    }
    mbar_arrive(empty0 + 8 * s);   // the fragments are in registers: the stage is the producer's again
    unsigned long long desc[4];    // pinned before the fence like the A registers (ptxas C7513)
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      desc[ks] = swizzled_desc<128>(sB0 + ch * B_CHUNK, ks);
      pin(desc[ks]);
    }
    int accumulate = ch != 0;   // a tile's first k-step overwrites the accumulators (scale-d 0), the rest add
    pin(accumulate);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int j = 0; j < BN / 2; ++j) pin(acc[mi][j]);
    wgmma_fence();   // the A registers written, read next by the tensor cores
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        if (ks == 0) {
          WgmmaRSTf32ScaleD<BN>::run(acc[mi], a[mi][ks], desc[ks], accumulate);
        } else {
          WgmmaRSTf32<BN>::run(acc[mi], a[mi][ks], desc[ks]);
        }
      }
    wgmma_commit();
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int j = 0; j < BN / 2; ++j) pin(acc[mi][j]);
    wgmma_wait<1>();   // chunk it - 1 retired: its A registers are the next step's to fill
  };

  mbar_wait(filt_bar, 0);   // the resident filter rows landed (async proxy writes, read by the tensor cores)
  unsigned a0[MI][4][4], a1[MI][4][4];   // the two A register sets, alternating by chunk
  for (int i = 0, it = 0; i < my_tiles; ++i) {
#pragma unroll   // whole: with an odd chunk count the last pair's second step is compiled out, not branched over
    for (int ch = 0; ch < NCH; ch += 2, it += 2) {
      step(a0, it, ch);
      if (ch + 1 < NCH) step(a1, it + 1, ch + 1);
    }
    it -= NCH & 1;   // an odd chunk count ran one step less than the loop counted
    wgmma_wait<0>();
    // Epilogue of tile t (image img, pixels px ..) from the accumulators, while the producer fills the ring with the
    // next tile's chunks: pixel rows r (< HW - px) of output channels n0 + k (< K)
    const int t = static_cast<int>(blockIdx.x) + i * static_cast<int>(gridDim.x);
    const int img = t / TPI, px = (t - img * TPI) * BM;
    float* ybase = y + (static_cast<long long>(img) * K + n0) * HW + px;
    const int kmax = min(BN, K - n0), rmax = HW - px;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int e2 = 0; e2 < 2; ++e2) {
        const int r = wg * (BM / WG) + mi * 64 + wq * 16 + g + 8 * e2;
        if (r >= rmax) continue;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
          for (int e1 = 0; e1 < 2; ++e1) {
            const int k = 8 * j + 2 * t4 + e1;
            if (k < kmax) ybase[static_cast<long long>(k) * HW + r] = acc[mi][j * 4 + 2 * e2 + e1];
          }
      }
  }
}

}  // namespace convtune
