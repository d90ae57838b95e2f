// convtune-arch: sm_90a   (wgmma assembles only for the arch-specific Hopper target)
//
// WORK IN PROGRESS (not registered, not tested on a GPU yet; see README.md): the general wgmma kernel's GEMM with a
// warp-specialised main loop. The shipped kernel (igemm_wgmma_fwd.cu) has every warpgroup copy and compute, with a
// block-wide barrier per chunk: ncu on the large compute-bound layers shows 1 block of 8 warps per SM and 65-70% of
// cycles with no eligible warp (benchmarks/results/igemm_wgmma_h200/unified_v2/ncu_dil2.txt). Here:
//
//   warpgroup 0 (producer, setmaxnreg.dec to PRODUCER_REGS): issues the cp.async copies of every chunk into stage
//     it % STAGES once the consumers released it (empty[s]), then cp.async.mbarrier.arrive.noinc on full[s] (each
//     producer thread's copies of the chunk complete before its arrival counts: 128 arrivals fill the stage);
//   warpgroups 1..WG (consumers, setmaxnreg.inc to CONSUMER_REGS): wait on full[s], fence the async proxy, issue the
//     chunk's wgmmas, commit, wait until the chunk before retired, release that chunk's stage (empty, 128*WG arrivals).
//
// No block-wide barrier in the main loop: copies run up to STAGES chunks ahead of the MMAs (the shipped loop: STAGES
// - 2), and the tensor cores are fed by warps that do nothing else. Same operands, layouts, template arguments and
// epilogue as igemm_wgmma_fwd_body (FQ = 0, no A_NCHW); the epilogue runs on the consumers with a named barrier.
#include "igemm_wgmma_fwd.cu"

namespace convtune {

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

// Waits for the phase of `parity` to complete; traps after ~2^24 failed tries (a miscounted barrier becomes a launch
// error, not a hung device).
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  for (unsigned tries = 0;; ++tries) {
    unsigned done;
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    if (done) return;
    if (tries > (1u << 24)) __trap();
  }
}

__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// this thread's cp.async copies issued so far arrive on `bar` when they complete (no extra pending count)
__device__ __forceinline__ void cp_async_mbar_arrive(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// A CUtensorMap (cuda.h) without the driver header: 128 opaque bytes, encoded on the host, passed by value as a
// __grid_constant__ kernel parameter (the TMA unit reads it through its parameter-space address).
struct alignas(64) TmaDesc {
  unsigned long long words[16];
};

__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

// box {inner c0, row c1} of a 2-D tiled tensor map into shared memory (the map's swizzle), completing on bar
__device__ __forceinline__ void tma_tile_2d(unsigned dst, const TmaDesc* map, int c0, int c1, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
      ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar) : "memory");
}

// im2col box of a 4-D NHWC tensor map: pixelsPerColumn pixels from (w, h, n) on (the walk of the map's bounding box,
// traversal strides = the convolution's), channels c.. c + channelsPerPixel, each pixel shifted by the tap's
// (off_w, off_h); outside the tensor: zeros
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

__device__ __forceinline__ void consumers_sync(int threads) {
  asm volatile("bar.sync 1, %0;\n" ::"r"(threads) : "memory");
}

// 128 * (WG + 1) threads. PRODUCER_REGS + WG * CONSUMER_REGS per 128 threads must fit the register file (64K);
// with cp.async copies the im2col bookkeeping makes the producer the heavier one: 144 / 176 compile without spills for
// 128 accumulators; with both operands by TMA one producer thread works: 40 / 232.
// MODE 0: every operand by cp.async (producer warpgroup); 1: A by cp.async, B (filters) by a TMA tile (map_b);
// 2: A by TMA im2col (map_a) and B by a TMA tile, issued by one producer thread.
template <class T, int BN, int MI, int WG, int STAGES, int CHB, int MODE, int PRODUCER_REGS, int CONSUMER_REGS>
__device__ __forceinline__ void igemm_wgmma_ws_body(const T* __restrict__ xt, const T* __restrict__ filt,
                                                    const TmaDesc* map_a, const TmaDesc* map_b,
                                                    T* __restrict__ y, float* __restrict__ ysplit, int N, int Cp,
                                                    int H, int W, int K, int P, int Q, int S, int SH, int SW, int PH,
                                                    int PW, int DH, int DW, int KRp, int chunks_per_split) {
  using Bits = decltype(T::bits);
  constexpr int E = static_cast<int>(sizeof(T));
  static_assert(CHB == 128 || CHB == 64 || CHB == 32, "rows of 128, 64 or 32 bytes");
  static_assert((PRODUCER_REGS + WG * CONSUMER_REGS) * 128 <= 65536, "the register file");
  constexpr int CH = CHB / E, VEC = 16 / E, PIECES = CHB / 16;
  constexpr int CTHREADS = 128 * WG, BM = 64 * WG * MI;          // consumer threads, rows
  constexpr int ROWS_PER_PASS = 128 / PIECES;                     // the producer's 128 threads per pass
  constexpr int A_ROWS = BM / ROWS_PER_PASS, B_COPIES = (BN * PIECES + 127) / 128;
  constexpr int A_BYTES = BM * CHB, B_BYTES = BN * CHB, STAGE_BYTES = A_BYTES + B_BYTES;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) unsigned long long full_bar[STAGES], empty_bar[STAGES];
  const unsigned smem0 = (smem_u32(smem_raw) + 1023u) & ~1023u;

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
      // MODE 0: every producer thread's copies of the chunk; 1: those and thread 0's expect_tx; 2: the expect_tx
      mbar_init(smem_u32(&full_bar[s]), MODE == 0 ? 128 : MODE == 1 ? 129 : 1);
      mbar_init(smem_u32(&empty_bar[s]), CTHREADS);      // every consumer thread done with the chunk
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (warp < 4) {   // ---- producer warpgroup: the copies -------------------------------------------------------
    regs_dec<PRODUCER_REGS>();
    if constexpr (MODE == 2) {   // one thread: per chunk one im2col box (BM pixels) and one filter tile
      if (tid == 0) {
        const int img = static_cast<int>(m0 / PQ), pq = static_cast<int>(m0 % PQ);
        const int h0 = (pq / Q) * SH - PH, w0 = (pq % Q) * SW - PW;   // the tile's first pixel's top-left tap
        for (int it = 0; it < nchunks; ++it) {
          const int s = it % STAGES;
          mbar_wait(smem_u32(&empty_bar[s]), ((it / STAGES) & 1) ^ 1);
          const unsigned sA = smem0 + s * STAGE_BYTES, sB = sA + A_BYTES, full = smem_u32(&full_bar[s]);
          const int chunk = chunk0 + it;
          const int tap = chunk / cblocks, cb = chunk - tap * cblocks;
          mbar_expect_tx(full, STAGE_BYTES);
          tma_im2col_4d(sA, map_a, cb * CH, w0, h0, img, static_cast<unsigned short>((tap % S) * DW),
                        static_cast<unsigned short>((tap / S) * DH), full);
          tma_tile_2d(sB, map_b, chunk * CH, n0, full);
        }
      }
      return;
    }
    const int piece = tid % PIECES;
    long long pix_base[A_ROWS];
    int pix_h0[A_ROWS], pix_w0[A_ROWS];
#pragma unroll
    for (int j = 0; j < A_ROWS; ++j) {
      const long long m = m0 + tid / PIECES + j * ROWS_PER_PASS;
      pix_base[j] = 0;
      pix_h0[j] = -(1 << 29);
      pix_w0[j] = 0;
      if (m < M) {
        const int img = static_cast<int>(m / PQ), pq = static_cast<int>(m % PQ);
        pix_h0[j] = (pq / Q) * SH - PH;
        pix_w0[j] = (pq % Q) * SW - PW;
        pix_base[j] = static_cast<long long>(img) * H * W * Cp + piece * VEC;
      }
    }
    for (int it = 0; it < nchunks; ++it) {
      const int s = it % STAGES;
      mbar_wait(smem_u32(&empty_bar[s]), ((it / STAGES) & 1) ^ 1);   // the first pass finds every stage free
      const unsigned sA = smem0 + s * STAGE_BYTES, sB = sA + A_BYTES;
      const int chunk = chunk0 + it;
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
      const int kbase = chunk * CH;
      if constexpr (MODE == 1) {
        if (tid == 0) {
          mbar_expect_tx(smem_u32(&full_bar[s]), B_BYTES);
          tma_tile_2d(sB, map_b, kbase, n0, smem_u32(&full_bar[s]));
        }
      } else {
#pragma unroll
        for (int j = 0; j < B_COPIES; ++j) {
          const int idx = tid + j * 128;
          if ((BN * PIECES) % 128 != 0 && idx >= BN * PIECES) break;
          const int row = idx / PIECES, c = idx % PIECES;
          const bool ok = n0 + row < K;
          const T* src = filt + static_cast<long long>(ok ? n0 + row : 0) * KRp + kbase + c * VEC;
          cp_async16_zfill(sB + swizzled_piece<CHB>(row, c), src, ok);
        }
      }
      cp_async_mbar_arrive(smem_u32(&full_bar[s]));
    }
    cp_async_wait<0>();   // nothing of this thread in flight when the block's shared memory is reused or freed
    return;
  }

  // ---- consumer warpgroups: the MMAs and the epilogue ------------------------------------------------------------
  regs_inc<CONSUMER_REGS>();
  const int ctid = tid - 128, wg = (warp >> 2) - 1;
  float acc[MI][BN / 2];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int j = 0; j < BN / 2; ++j) acc[mi][j] = 0.0f;
  for (int it = 0; it < nchunks; ++it) {
    const int s = it % STAGES;
    mbar_wait(smem_u32(&full_bar[s]), (it / STAGES) & 1);
    if constexpr (MODE != 2) fence_proxy_async();   // cp.async's words (generic proxy), read by the tensor cores
    const unsigned sA = smem0 + s * STAGE_BYTES + wg * (BM / WG) * CHB, sB = smem0 + s * STAGE_BYTES + A_BYTES;
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < CHB / 32; ++ks)
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
        WgmmaSS<T, BN>::run(acc[mi], swizzled_desc<CHB>(sA + mi * 64 * CHB, ks), swizzled_desc<CHB>(sB, ks));
    wgmma_commit();
    wgmma_wait<1>();                                                   // chunk it - 1 retired
    if (it > 0) mbar_arrive(smem_u32(&empty_bar[(it - 1) % STAGES]));   // its stage goes back to the producer
  }
  wgmma_wait<0>();

  const int lane = tid & 31, wq = warp & 3, g = lane >> 2, t = lane & 3;
  // the fragments with m < M and col < K straight to global memory: fp32 atomics into ysplit, or y as T (the shipped
  // kernel's store_fragments; to share with it when this ships)
  auto store_fragments = [&](bool atomics) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int e2 = 0; e2 < 2; ++e2) {
        const long long m = m0 + wg * (BM / WG) + mi * 64 + wq * 16 + g + 8 * e2;
        if (m >= M) continue;
        const long long img = m / PQ, row = img * K * PQ + (m - img * PQ);
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
          for (int e1 = 0; e1 < 2; ++e1) {
            const int col = n0 + 8 * j + 2 * t + e1;
            if (col >= K) continue;
            const long long at = row + static_cast<long long>(col) * PQ;
            if (atomics) {
              atomicAdd(ysplit + at, acc[mi][j * 4 + 2 * e2 + e1]);
            } else {
              y[at] = round_to<T>(acc[mi][j * 4 + 2 * e2 + e1]);
            }
          }
      }
  };
  if (gridDim.z > 1) {   // split reduction: fp32 atomics into ysplit
    store_fragments(true);
    return;
  }
  // the tile through shared memory ([BN channels][BM + 16 bytes of pixels]), then coalesced NCHW pixel pairs, as the
  // shipped epilogue; every stage is free (each was waited on, the producer's copies all landed)
  constexpr int LD = BM + 16 / E;
  if constexpr (BN * LD * E + BM * 8 > STAGES * STAGE_BYTES) {   // small stages (32-byte rows): direct stores
    store_fragments(false);
    return;
  }
  consumers_sync(CTHREADS);
  unsigned char* staged = smem_raw + (smem0 - smem_u32(smem_raw));
  Bits* tile = reinterpret_cast<Bits*>(staged);
  long long* pix = reinterpret_cast<long long*>(staged + BN * LD * E);
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int e2 = 0; e2 < 2; ++e2)
#pragma unroll
      for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int e1 = 0; e1 < 2; ++e1)
          tile[(8 * j + 2 * t + e1) * LD + wg * (BM / WG) + mi * 64 + wq * 16 + g + 8 * e2] =
              round_to<T>(acc[mi][j * 4 + 2 * e2 + e1]).bits;
  for (int i = ctid; i < BM; i += CTHREADS) {
    const long long m = m0 + i;
    const long long img = m / PQ;
    pix[i] = m < M ? img * K * PQ + (m - img * PQ) : 0;
  }
  consumers_sync(CTHREADS);
  const bool even = (PQ & 1) == 0;
  Bits* yb = reinterpret_cast<Bits*>(y);
  for (int idx = ctid; idx < BN * (BM / 2); idx += CTHREADS) {
    const int cl = idx / (BM / 2), pr = idx - cl * (BM / 2);
    const int col = n0 + cl;
    const long long m = m0 + 2 * pr;
    if (col >= K || m >= M) continue;
    const Bits* src = tile + cl * LD + 2 * pr;
    const long long at = pix[2 * pr] + static_cast<long long>(col) * PQ;
    if (even) {
      if constexpr (E == 4) {
        *reinterpret_cast<uint2*>(yb + at) = make_uint2(src[0], src[1]);
      } else {
        *reinterpret_cast<unsigned*>(yb + at) = static_cast<unsigned>(src[0]) | (static_cast<unsigned>(src[1]) << 16);
      }
    } else {
      yb[at] = src[0];
      if (m + 1 < M) yb[pix[2 * pr + 1] + static_cast<long long>(col) * PQ] = src[1];
    }
  }
}

}  // namespace convtune
