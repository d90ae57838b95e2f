// convtune-arch: sm_90a   (wgmma assembles only for the arch-specific Hopper target)
//
// 1x1 convolution forward (stride 1, no padding) in TF32 on Hopper's warpgroup MMA, persistent, with the block's
// filter rows resident in shared memory. The GEMM is the TF32 1x1 kernel's (igemm_wgmma_fwd.cu, A_NCHW: rows M = the
// N*H*W pixels, columns the K output channels, the reduction over C in chunks of 32; fp32 accumulation, y float32):
//
//   y[n,k,p] = sum_c tf32(x[n,c,p]) * tf32(w[k,c])
//
// A = x straight from NCHW through registers (TF32 wgmma reads shared-memory operands K-major only, x's pixels are
// contiguous per channel): a ring stage holds [32 channels][BM + 8 pixels] words copied 16 bytes (4 pixels of one
// channel) at a time, each chunk's fragments are read from it and rounded to TF32 (cvt.rna, as cuDNN rounds).
// B = the packed filters (K, Cp) TF32-rounded, K-major, 128-byte swizzled rows: the block's BN rows n0 .. n0 + BN over
// all Cp channels (NCH = Cp / 32 chunks of BN rows) are copied into shared memory once.
//
// Why a second kernel: the first one's blocks run only Cp/32 chunks each on small-C layers, so every block pays the
// pipeline's fill and its epilogue unhidden and re-reads its filter rows (the yolov3 52x52 head, C = 256, K = 255:
// 338 x 2 blocks of 8 chunks). Here gridDim.x blocks per column tile (about one per SM) walk the pixel tiles
// blockIdx.x, blockIdx.x + gridDim.x, ...; one x ring runs across tiles, so the next tile's first copies are in flight
// during a tile's epilogue. Two A register sets alternate: a chunk's fragments are read while the chunk before is
// still in the tensor cores (the first kernel retires every chunk before reading the next one's fragments). Because
// A is read into registers before the next barrier, a ring stage is free one chunk after it was read: the copies run
// STAGES - 1 chunks ahead.
//
// Shared memory: [filters: NCH x BN x 128 B][ring: STAGES x 32 x (BM + 8) x 4 B][staged tile: BN x (BM + 4) x 4 B]
// [BM/4 pixel-group offsets x 8 B]. The epilogue stages the tile channel-major and stores 4 consecutive pixels of one
// output channel per thread (16 bytes: H*W % 4 == 0 and tiles start at multiples of 64). No split.
#include "igemm_wgmma_fwd.cu"
#include "wgmma_tf32_rs_zd.cuh"

namespace convtune {

// An empty volatile asm that reads and writes v: v is computed before it, and volatile asms keep their order, so a
// value pinned before wgmma.fence is never computed between the fence and the wgmma that reads it.
__device__ __forceinline__ void pin(unsigned& v) { asm volatile("" : "+r"(v)); }
__device__ __forceinline__ void pin(int& v) { asm volatile("" : "+r"(v)); }
__device__ __forceinline__ void pin(unsigned long long& v) { asm volatile("" : "+l"(v)); }
__device__ __forceinline__ void pin(float& v) { asm volatile("" : "+f"(v)::"memory"); }

template <int BN, int MI, int WG, int STAGES, int NCH>
__device__ __forceinline__ void igemm_wgmma_1x1_resident_body(const float* __restrict__ x,
                                                               const wg_tf32* __restrict__ filt,
                                                               float* __restrict__ y, int C, int HW, int K, int NP,
                                                               int n_tiles) {
  constexpr int CH = 32;                           // channels per chunk (one 128-byte filter row of TF32 words)
  constexpr int CP = NCH * CH;                     // the packed filters' row length
  constexpr int THREADS = 128 * WG, BM = 64 * WG * MI;
  constexpr int B_CHUNK = BN * 128;                // bytes of one chunk of the resident filter rows
  constexpr int B_BYTES = NCH * B_CHUNK;
  constexpr int LDA = BM + 8;                      // words per channel row of a ring stage (conflict-free fragments)
  constexpr int A_BYTES = CH * LDA * 4;            // one ring stage
  constexpr int LDT = BM + 4;                      // words per channel row of the staged tile
  constexpr int TILE_BYTES = BN * LDT * 4;
  constexpr int A_GROUPS = BM / 4, A_ROW_STEP = THREADS / A_GROUPS, A_COPIES = CH / A_ROW_STEP;
  static_assert(THREADS % A_GROUPS == 0 && CH % A_ROW_STEP == 0, "A copies fill whole passes");
  static_assert(STAGES >= 2, "one stage read, one loading");
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned smem0 = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const unsigned sB0 = smem0, sR0 = smem0 + B_BYTES;
  unsigned char* staged = smem_raw + (smem0 - smem_u32(smem_raw)) + B_BYTES + STAGES * A_BYTES;
  float* tile_s = reinterpret_cast<float*>(staged);
  long long* pix = reinterpret_cast<long long*>(staged + TILE_BYTES);   // y offset of each 4-pixel group's channel 0

  const int tid = threadIdx.x, warp = tid >> 5, wg = warp >> 2;
  const int n0 = blockIdx.y * BN;
  const int my_tiles = n_tiles > static_cast<int>(blockIdx.x)
                           ? (n_tiles - 1 - static_cast<int>(blockIdx.x)) / static_cast<int>(gridDim.x) + 1 : 0;
  const int total = my_tiles * NCH;                // this block's chunks, over all its tiles
  if (total == 0) return;

  // The resident filter rows, once: they join the first ring stage's copy group (waited for with it).
  for (int idx = tid; idx < NCH * BN * 8; idx += THREADS) {
    const int ch = idx / (BN * 8), rem = idx - ch * (BN * 8);
    const int row = rem >> 3, c = rem & 7;
    const bool ok = n0 + row < K;
    const wg_tf32* src = filt + static_cast<long long>(ok ? n0 + row : 0) * CP + ch * CH + c * 4;
    cp_async16_zfill(sB0 + ch * B_CHUNK + swizzled_piece<128>(row, c), src, ok);
  }

  // This thread's A copies: pixels 4*pg .. 4*pg + 3 of the tile (one image: H*W % 4 == 0) of channel rows
  // tid / A_GROUPS + j * A_ROW_STEP of each chunk; the tile's pixel base is recomputed (one 32-bit division:
  // N*H*W + BM < 2^31) when a tile's first chunk is loaded.
  const int pg = tid % A_GROUPS, arow = tid / A_GROUPS;
  long long a_base = 0;
  bool a_ok = false;
  auto load_stage = [&](int stage, int it) {      // chunk it of the block's walk: tile it / NCH, chunk it % NCH
    const int i = it / NCH, ch = it - i * NCH;
    if (ch == 0) {
      const int p = (static_cast<int>(blockIdx.x) + i * static_cast<int>(gridDim.x)) * BM + 4 * pg;
      a_ok = p < NP;
      const int img = a_ok ? p / HW : 0;
      a_base = static_cast<long long>(img) * C * HW + (a_ok ? p - img * HW : 0);
    }
    const unsigned sA = sR0 + stage * A_BYTES;
#pragma unroll
    for (int j = 0; j < A_COPIES; ++j) {
      const int row = arow + j * A_ROW_STEP, c = ch * CH + row;
      const bool ok = a_ok && c < C;
      cp_async16_zfill(sA + (row * LDA + 4 * pg) * 4, ok ? x + a_base + static_cast<long long>(c) * HW : x, ok);
    }
  };

  float acc[MI][BN / 2];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)   // defined before the first wgmma; a tile's first k-step overwrites them (scale-d 0)
#pragma unroll
    for (int j = 0; j < BN / 2; ++j) acc[mi][j] = 0.0f;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < total) load_stage(s, s);
    cp_async_commit();
  }

  const int lane = tid & 31, wq = warp & 3, g = lane >> 2, t = lane & 3;
  // One chunk (chunk ch of the block's running chunk it): fragments into `a` (the wgmma that read `a` last, two
  // chunks back, retired at the end of the step before), the MMAs, the copies STAGES - 1 chunks ahead.
  auto step = [&](unsigned (&a)[MI][4][4], int it, int ch) {
    cp_async_wait<STAGES - 2>();
    if (it == 0) fence_proxy_async();   // the resident filters' words, read next by the tensor cores (async proxy)
    __syncthreads();   // chunk it landed; every thread read chunk it - 1's fragments (its stage is reloaded below)
    const unsigned sA = sR0 + (it % STAGES) * A_BYTES;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const int r0 = wg * (BM / WG) + mi * 64 + wq * 16 + g;
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {   // rows r0 (+8), channels 8ks + t (+4), rounded to TF32
        const unsigned at = sA + ((ks * 8 + t) * LDA + r0) * 4;
        a[mi][ks][0] = operand_bits<wg_tf32>(lds_u32(at));
        a[mi][ks][1] = operand_bits<wg_tf32>(lds_u32(at + 8 * 4));
        a[mi][ks][2] = operand_bits<wg_tf32>(lds_u32(at + 4 * LDA * 4));
        a[mi][ks][3] = operand_bits<wg_tf32>(lds_u32(at + (4 * LDA + 8) * 4));
#pragma unroll
        for (int e = 0; e < 4; ++e) pin(a[mi][ks][e]);
      }
    }
    // B's descriptors and the scale-d flag, pinned before the fence like the A registers: an input register of a
    // wgmma defined between the fence and the last wgmma serialises them (ptxas C7513)
    unsigned long long desc[4];
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      desc[ks] = swizzled_desc<128>(sB0 + ch * B_CHUNK, ks);
      pin(desc[ks]);
    }
    int accumulate = ch != 0;   // a tile's first k-step overwrites the accumulators (scale-d 0), the rest add
    pin(accumulate);
    // the accumulators pinned on both sides of the MMAs (CUTLASS's warpgroup_fence_operand): no copy of them is
    // scheduled among the wgmmas
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
          WgmmaRSTf32<BN>::run(acc[mi], a[mi][ks], desc[ks]);   // scale-d an immediate 1: no predicate to set
        }
      }
    wgmma_commit();
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int j = 0; j < BN / 2; ++j) pin(acc[mi][j]);
    const int next = it + STAGES - 1;
    if (next < total) load_stage(next % STAGES, next);
    cp_async_commit();
    wgmma_wait<1>();   // chunk it - 1 retired: its A registers are the next step's to fill
  };

  unsigned a0[MI][4][4], a1[MI][4][4];   // the two A register sets, alternating by chunk
  // Tiles outer, a tile's chunks inner (one wgmma group in flight across the inner loop's back edge, none across the
  // outer one: ptxas then needs no wait of its own before the epilogue reads the accumulators).
  for (int i = 0, it = 0; i < my_tiles; ++i) {
#pragma unroll   // whole: with an odd chunk count the last pair's second step is compiled out, not branched over
    for (int ch = 0; ch < NCH; ch += 2, it += 2) {
      step(a0, it, ch);
      if (ch + 1 < NCH) step(a1, it + 1, ch + 1);
    }
    it -= NCH & 1;   // an odd chunk count ran one step less than the loop counted
    // Epilogue of tile blockIdx.x + i * gridDim.x, while the next tile's first copies are in flight. The staged
    // tile is free: every thread passed at least one loop-top barrier since it last read it.
    wgmma_wait<0>();
    const int p0 = (static_cast<int>(blockIdx.x) + i * static_cast<int>(gridDim.x)) * BM;
    for (int q = tid; q < BM / 4; q += THREADS) {   // one division per 4-pixel group of the tile
      const int p = p0 + 4 * q;
      const int img = p < NP ? p / HW : 0;
      pix[q] = p < NP ? static_cast<long long>(img) * K * HW + (p - img * HW) : -1;
    }
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int e2 = 0; e2 < 2; ++e2)
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
          for (int e1 = 0; e1 < 2; ++e1)   // (pixel row, channel 8j + 2t + e1) -> channel-major; LDT = 4 mod 32:
            tile_s[(8 * j + 2 * t + e1) * LDT + wg * (BM / WG) + mi * 64 + wq * 16 + g + 8 * e2] =   // no conflicts
                acc[mi][j * 4 + 2 * e2 + e1];
    __syncthreads();
    // 4 consecutive pixels of one output channel per store, consecutive threads along the channel's pixels
    constexpr int GROUPS = BM / 4;
    const int kmax = min(BN, K - n0);
    for (int idx = tid; idx < kmax * GROUPS; idx += THREADS) {
      const int cl = idx / GROUPS, q = idx - cl * GROUPS;
      const long long base = pix[q];
      if (base < 0) continue;
      *reinterpret_cast<float4*>(y + base + static_cast<long long>(n0 + cl) * HW) =
          *reinterpret_cast<const float4*>(tile_s + cl * LDT + 4 * q);
    }
  }
  cp_async_wait<0>();   // nothing is left in flight (the last groups are empty); leave no copy behind the exit
}

}  // namespace convtune
