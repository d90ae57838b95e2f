// convtune-arch: sm_90a   (wgmma assembles only for the arch-specific Hopper target)
//
// 1x1 convolution forward (stride 1, no padding) for 16-bit storage on Hopper's warpgroup MMA, persistent, filters
// resident in shared memory, with WG consumer warpgroups that take turns over the block's pixel tiles ("ping-pong").
// The GEMM is igemm_wgmma_half_1x1.cu's (per image Y_n (K x HW) = W (K x C) . X_n (C x HW); A = the packed filters
// (K, Cp), K-major; B = x straight from NCHW, N-major, imm-trans-b = 1; fp32 accumulation, y rounded once):
//
//   y[n,k,p] = sum_c w[k,c] * x[n,c,p]
//
// Why a third 1x1 kernel: igemm_wgmma_half_1x1_resident.cu runs one pipeline per SM (its filter rows take most of the
// shared memory), and Nsight Compute on the yolov3 52x52 head (C 256, K 255, b8) shows it latency-bound: 2 warps per
// scheduler, no eligible warp 61% of cycles, 0.77 TB/s of DRAM; two blocks per SM with 3 stages each (to fit two
// copies of the filters) lose 35%. Here the WG warpgroups of one block share one copy of the filter rows, and each
// runs its own tiles through its own ring of STAGES stages: warpgroup w takes the block's tiles w, w + WG, ... (block
// b's tiles are b, b + gridDim.x, ...), so one warpgroup's epilogue and copy waits overlap another's MMAs, and an SM
// keeps WG x (STAGES - 2) chunks of x in flight. Every warpgroup covers all BM = 64 * MI filter rows of the block.
//
// Shared memory: [filters: NCH x BM x 128 B][WG rings: STAGES x BN x 128 B each]; the B stage layout and descriptors
// are igemm_wgmma_half_1x1.cu's. No staged tile: the epilogue stores straight from registers (16 bytes a thread after
// a transpose across each quad), which leaves the shared memory to the rings. A warpgroup synchronises only its own 128 threads (named barrier 1 + w).
#include "igemm_wgmma_half_1x1.cu"
#include "wgmma_half_ss_tb_zd.cuh"

namespace convtune {

__device__ __forceinline__ void warpgroup_barrier(int id) {   // the 128 threads of one warpgroup
  asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory");
}

// A 4 x 4 transpose across the lanes of a quad (lane & 3 = t): w[u] = lane u's v[t]. Round r: a lane sends its
// v[(t - r) & 3] and receives lane ((t + r) & 3)'s, which is that lane's v[t]; selects keep the indices static.
__device__ __forceinline__ void quad_transpose(const unsigned (&v)[4], unsigned (&w)[4], int lane) {
  const int t = lane & 3;
#pragma unroll
  for (int q = 0; q < 4; ++q) w[q] = 0u;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int s = (t - r) & 3, u = (t + r) & 3;
    const unsigned send = s == 0 ? v[0] : s == 1 ? v[1] : s == 2 ? v[2] : v[3];
    const unsigned got = __shfl_sync(0xffffffffu, send, (lane & ~3) | u);
#pragma unroll
    for (int q = 0; q < 4; ++q) w[q] = q == u ? got : w[q];
  }
}

template <class T, int BN, int MI, int WG, int STAGES, int PIX, int NCH>
__device__ __forceinline__ void igemm_wgmma_half_1x1_pingpong_body(const T* __restrict__ x,
                                                                    const T* __restrict__ filt, T* __restrict__ y,
                                                                    int C, int HW, int K, int NP, int Cp,
                                                                    int n_tiles) {
  constexpr int CH = 64;                           // channels per chunk (one 128-byte A row)
  constexpr int WG_THREADS = 128, THREADS = WG_THREADS * WG, BM = 64 * MI;
  constexpr int A_CHUNK = BM * 128;                // bytes of one chunk of the resident filter rows
  constexpr int A_BYTES = NCH * A_CHUNK;
  constexpr int B_BYTES = BN * 128;                // one ring stage: 64 channels x BN pixels
  static_assert(PIX == 8 || PIX == 4, "copies of 8 or 4 pixels");
  constexpr int B_PIECES = BN / PIX;               // copies per channel of a chunk (16 or 8 bytes)
  constexpr int B_COPIES = CH * B_PIECES / WG_THREADS;
  constexpr unsigned SBO = (BN / 64) * 1024;       // bytes between 8-channel groups of B
  static_assert(CH * B_PIECES % WG_THREADS == 0, "B copies fill whole passes");
  static_assert(STAGES >= 3, "one stage computing, one in the tensor cores, one loading");
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned smem0 = (smem_u32(smem_raw) + 1023u) & ~1023u;

  const int tid = threadIdx.x, wg = tid / WG_THREADS, wtid = tid % WG_THREADS;
  const unsigned sA0 = smem0, sB0 = smem0 + A_BYTES + wg * STAGES * B_BYTES;
  const int m0 = blockIdx.y * BM;
  const int block_tiles = n_tiles > static_cast<int>(blockIdx.x)
                              ? (n_tiles - 1 - static_cast<int>(blockIdx.x)) / static_cast<int>(gridDim.x) + 1 : 0;
  const int my_tiles = block_tiles > wg ? (block_tiles - 1 - wg) / WG + 1 : 0;
  const int total = my_tiles * NCH;                // this warpgroup's chunks, over all its tiles
  // pixel tile of this warpgroup's i-th tile
  auto tile_of = [&](int i) { return static_cast<int>(blockIdx.x) + (wg + i * WG) * static_cast<int>(gridDim.x); };

  // The resident filter rows, once, by every thread of the block.
  for (int idx = tid; idx < NCH * BM * 8; idx += THREADS) {
    const int ch = idx / (BM * 8), rem = idx - ch * (BM * 8);
    const int row = rem >> 3, c = rem & 7;
    const bool ok = m0 + row < K;
    const T* src = filt + static_cast<long long>(ok ? m0 + row : 0) * Cp + ch * CH + c * 8;
    cp_async16_zfill(sA0 + ch * A_CHUNK + swizzled_piece<128>(row, c), src, ok);
  }
  cp_async_commit();

  // This thread's B copies (igemm_wgmma_half_1x1_resident.cu's, over the warpgroup's 128 threads).
  const int piece = wtid % B_PIECES;
  unsigned b_soff[B_COPIES];
  int b_cl[B_COPIES];
#pragma unroll
  for (int j = 0; j < B_COPIES; ++j) {
    const int cl = wtid / B_PIECES + j * (WG_THREADS / B_PIECES);  // channel of the chunk, 0..63
    const int p16 = piece * PIX / 8;                                 // the 16-byte piece of 8 pixels
    const int kl = cl & 7, nb = p16 >> 3, pl = p16 & 7;
    b_cl[j] = cl;
    b_soff[j] = (cl >> 3) * SBO + nb * 1024 + kl * 128 + ((pl ^ kl) << 4) + (piece * PIX % 8) * 2;
  }
  long long b_base = 0;
  bool b_ok = false;
  auto load_stage = [&](int stage, int it) {      // chunk it of the warpgroup's walk: tile it / NCH, chunk it % NCH
    const int i = it / NCH, ch = it - i * NCH;
    if (ch == 0) {
      const int pb = tile_of(i) * BN + piece * PIX;
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
#pragma unroll
  for (int s = 0; s < STAGES - 2; ++s) {
    if (s < total) load_stage(s, s);
    cp_async_commit();
  }
  // Every thread's filter copies (and its first stages) landed and are visible to the tensor cores of both
  // warpgroups: the one block-wide barrier; after it each warpgroup runs on its own.
  cp_async_wait<0>();
  fence_proxy_async();
  __syncthreads();
  if (total == 0) return;

  float acc[MI][BN / 2];
  const int lane = tid & 31, wq = (wtid >> 5) & 3, g = lane >> 2, t = lane & 3;
  unsigned short* yb = reinterpret_cast<unsigned short*>(y);
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)   // defined before the first wgmma; a tile's first k-step overwrites them (scale-d 0)
#pragma unroll
    for (int j = 0; j < BN / 2; ++j) acc[mi][j] = 0.0f;

  for (int i = 0, it = 0; i < my_tiles; ++i) {
    for (int ch = 0; ch < NCH; ++ch, ++it) {
      cp_async_wait<STAGES - 3>();
      fence_proxy_async();        // the copies' words, read next by the tensor cores (async proxy)
      warpgroup_barrier(1 + wg);  // chunk it landed; the warpgroup retired chunk it - 2 (its stage is reloaded below)
      wgmma_fence();
      const unsigned sA = sA0 + ch * A_CHUNK, sB = sB0 + (it % STAGES) * B_BYTES;
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
    wgmma_wait<0>();
    // Epilogue: accumulator j * 4 + 2 * e2 + h of row block mi is output channel m0 + mi*64 + wq*16 + g + 8*e2 at
    // pixel 8j + 2t + h of the tile, so the four threads of a quad hold 16 contiguous bytes of one channel per j. A
    // 4 x 4 transpose across the quad (pixel pairs of j = 4jg .. 4jg + 3) gives each thread the 8 pixels of one j:
    // 16-byte stores (8-byte halves where H*W % 8 == 4), a warp's store then fills whole 32-byte sectors, where
    // the untransposed pairs (4-byte stores) write half sectors of 8 rows per instruction.
    const int p0 = tile_of(i) * BN;
#pragma unroll
    for (int jg = 0; jg < BN / 32; ++jg) {
      long long base[8 / PIX];
      bool ok[8 / PIX];
#pragma unroll
      for (int h = 0; h < 8 / PIX; ++h) {   // PIX pixels of one image (H*W % PIX == 0)
        const int p = p0 + 32 * jg + 8 * t + h * PIX;
        ok[h] = p < NP;
        const int img = ok[h] ? p / HW : 0;
        base[h] = static_cast<long long>(img) * K * HW + (ok[h] ? p - img * HW : 0);
      }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int e2 = 0; e2 < 2; ++e2) {
          unsigned v[4], w[4];
#pragma unroll
          for (int q = 0; q < 4; ++q)
            v[q] = static_cast<unsigned>(round_to<T>(acc[mi][(4 * jg + q) * 4 + 2 * e2]).bits) |
                   (static_cast<unsigned>(round_to<T>(acc[mi][(4 * jg + q) * 4 + 2 * e2 + 1]).bits) << 16);
          quad_transpose(v, w, lane);
          const long long k = m0 + mi * 64 + wq * 16 + g + 8 * e2;
          if (k >= K) continue;
          if constexpr (PIX == 8) {
            if (ok[0]) *reinterpret_cast<uint4*>(yb + base[0] + k * HW) = make_uint4(w[0], w[1], w[2], w[3]);
          } else {
            if (ok[0]) *reinterpret_cast<uint2*>(yb + base[0] + k * HW) = make_uint2(w[0], w[1]);
            if (ok[1]) *reinterpret_cast<uint2*>(yb + base[1] + k * HW) = make_uint2(w[2], w[3]);
          }
        }
    }
  }
  cp_async_wait<0>();   // nothing is left in flight (the last groups are empty); leave no copy behind the exit
}

}  // namespace convtune
