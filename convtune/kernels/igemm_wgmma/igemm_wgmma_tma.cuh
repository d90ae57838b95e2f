// The general wgmma GEMM fed by the Tensor Memory Accelerator (sm_90a): warp-specialised, both operands by TMA.
//
// Same GEMM, operands, shared-memory layout (STAGES stages of [A: BM rows x CHB][B: BN rows x CHB], 1024-byte
// aligned, the CHB-byte swizzle, which is the TMA's SWIZZLE_<CHB>B pattern) and epilogue as igemm_wgmma_fwd_body
// (no folded taps). 128 * (WG + 1) threads:
//
//   warpgroup 0, the producer (setmaxnreg.dec 40): one thread issues, per chunk, once the consumers released the
//     stage (empty[s]): mbarrier.expect_tx(full[s], STAGE_BYTES), then an im2col box of x's channels-last copy
//     (map_a: BM output pixels from the tile's first, the walk of the output pixels with the convolution's traversal
//     strides, each pixel's input position shifted by the tap's (s*DW, r*DH), zeros outside x; CH channels from
//     cb*CH) and a tile of the filters (map_b: BN rows from n0, CH columns from chunk*CH; zero rows past K);
//   warpgroups 1..WG, the consumers (setmaxnreg.inc 232): wait on full[s], issue the chunk's wgmmas, commit, release
//     the chunk before once wgmma.wait_group 1 retired it (empty, 128*WG arrivals); the epilogue syncs the consumers
//     on named barrier 1.
//
// No block-wide barrier and no copy instruction in the consumers' loop; the copies run up to STAGES chunks ahead.
// The tensor maps are encoded on the host per (plan, operand pointer) (convtune/kernels/tensor_map.py) and passed
// by value (__grid_constant__). The barriers live after the stages: dynamic shared memory is smem_bytes + 128.
#pragma once
#include "wgmma_common.cuh"
#include "wgmma_epilogue.cuh"
#include "wgmma_half_ss.cuh"
#include "wgmma_storage.cuh"
#include "wgmma_tf32_ss.cuh"

namespace convtune {

// A CUtensorMap (cuda.h) without the driver header: 128 opaque bytes
struct alignas(64) TmaDesc {
  unsigned long long words[16];
};

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

// Waits until the phase of `parity` completed (acquire: the stage's bytes, or its release, are visible after).
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  asm volatile(   // the label is local to the braces' scope: every inlined copy has its own
      "{\n.reg .pred done;\nWAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n}\n" ::"r"(bar), "r"(parity) : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

// box {c0 (inner), c1 (row)} of a 2-D tiled map into shared memory, completing `bytes` on bar
__device__ __forceinline__ void tma_tile_2d(unsigned dst, const TmaDesc* map, int c0, int c1, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
      ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar) : "memory");
}

// im2col box of a 4-D (C, W, H, N) map: the map's pixelsPerColumn pixels from (w, h, n) on, channels c ..
__device__ __forceinline__ void tma_im2col_4d(unsigned dst, const TmaDesc* map, int c, int w, int h, int n,
                                              unsigned short off_w, unsigned short off_h, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
      "%5}], [%6], {%7, %8};\n"
      ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c), "r"(w), "r"(h), "r"(n), "r"(bar),
      "h"(off_w), "h"(off_h) : "memory");
}

template <int REGS>
__device__ __forceinline__ void regs_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS)); }
template <int REGS>
__device__ __forceinline__ void regs_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS)); }

constexpr int TMA_PRODUCER_REGS = 40, TMA_CONSUMER_REGS = 232;   // 40 + 2 * 232 <= 512 per 128-thread slice
constexpr int TMA_BARRIER_BYTES = 128;                            // 2 * STAGES mbarriers of 8 bytes, STAGES <= 8

template <class T, int BN, int MI, int WG, int STAGES, int CHB>
__device__ __forceinline__ void igemm_wgmma_tma_body(const TmaDesc* map_a, const TmaDesc* map_b, T* __restrict__ y,
                                                     float* __restrict__ ysplit, int N, int Cp, int K, int P, int Q,
                                                     int S, int SH, int SW, int PH, int PW, int DH, int DW, int KRp,
                                                     int chunks_per_split) {
  constexpr int E = static_cast<int>(sizeof(T));
  static_assert(CHB == 128 || CHB == 64 || CHB == 32, "rows of 128, 64 or 32 bytes");
  static_assert(2 * STAGES * 8 <= TMA_BARRIER_BYTES, "the barriers' bytes");
  constexpr int CH = CHB / E, CTHREADS = 128 * WG, BM = 64 * WG * MI;
  constexpr int A_BYTES = BM * CHB, B_BYTES = BN * CHB, STAGE_BYTES = A_BYTES + B_BYTES;
  static_assert(BM <= 256 && BN <= 256, "a TMA box holds at most 256 rows");
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned smem0 = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const unsigned full0 = smem0 + STAGES * STAGE_BYTES, empty0 = full0 + 8 * STAGES;   // mbarriers [s] at + 8 s

  const int tid = threadIdx.x, warp = tid >> 5;
  const int PQ = P * Q;
  const long long M = static_cast<long long>(N) * PQ;
  const long long m0 = static_cast<long long>(blockIdx.x) * BM;
  const int n0 = blockIdx.y * BN;
  const int cblocks = Cp / CH, chunks_total = KRp / CH;
  const int chunk0 = blockIdx.z * chunks_per_split;
  const int nchunks = min(chunks_total - chunk0, chunks_per_split);

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full0 + 8 * s, 1);           // the producer's expect_tx (the bytes complete the phase)
      mbar_init(empty0 + 8 * s, CTHREADS);   // every consumer thread done with the chunk
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (warp < 4) {   // ---- the producer ------------------------------------------------------------------------------
    regs_dec<TMA_PRODUCER_REGS>();
    if (tid == 0) {
      const int img = static_cast<int>(m0 / PQ), pq = static_cast<int>(m0 % PQ);
      const int h0 = (pq / Q) * SH - PH, w0 = (pq % Q) * SW - PW;   // the tile's first pixel's top-left tap
      for (int it = 0; it < nchunks; ++it) {
        const int s = it % STAGES;
        mbar_wait(empty0 + 8 * s, ((it / STAGES) & 1) ^ 1);   // the first pass finds every stage free
        const unsigned sA = smem0 + s * STAGE_BYTES, full = full0 + 8 * s;
        const int chunk = chunk0 + it;
        const int tap = chunk / cblocks, cb = chunk - tap * cblocks;
        mbar_expect_tx(full, STAGE_BYTES);
        tma_im2col_4d(sA, map_a, cb * CH, w0, h0, img, static_cast<unsigned short>((tap % S) * DW),
                      static_cast<unsigned short>((tap / S) * DH), full);
        tma_tile_2d(sA + A_BYTES, map_b, chunk * CH, n0, full);
      }
    }
    return;
  }

  // ---- the consumers: the MMAs and the epilogue ---------------------------------------------------------------------
  regs_inc<TMA_CONSUMER_REGS>();
  const int ctid = tid - 128, wg = ctid >> 7;
  float acc[MI][BN / 2];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int j = 0; j < BN / 2; ++j) acc[mi][j] = 0.0f;
  for (int it = 0; it < nchunks; ++it) {
    const int s = it % STAGES;
    mbar_wait(full0 + 8 * s, (it / STAGES) & 1);   // TMA wrote in the async proxy: no proxy fence
    const unsigned sA = smem0 + s * STAGE_BYTES + wg * (BM / WG) * CHB, sB = smem0 + s * STAGE_BYTES + A_BYTES;
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < CHB / 32; ++ks)   // k-steps of 32 bytes across the row (k16 16-bit, k8 TF32)
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
        WgmmaSS<T, BN>::run(acc[mi], swizzled_desc<CHB>(sA + mi * 64 * CHB, ks), swizzled_desc<CHB>(sB, ks));
    wgmma_commit();
    wgmma_wait<1>();                                                   // chunk it - 1 retired
    if (it > 0) mbar_arrive(empty0 + 8 * ((it - 1) % STAGES));          // its stage goes back to the producer
  }
  wgmma_wait<0>();
  // every stage is free: each full phase was waited on (all bytes landed), every MMA retired
  unsigned char* staged = smem_raw + (smem0 - smem_u32(smem_raw));
  wgmma_store_tile<T, BN, MI, WG, STAGES * STAGE_BYTES>(acc, y, ysplit, staged, m0, n0, M, PQ, K, ctid, [] {
    asm volatile("bar.sync 1, %0;\n" ::"n"(CTHREADS) : "memory");
  });
}

}  // namespace convtune
