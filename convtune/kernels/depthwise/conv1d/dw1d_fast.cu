// Causal depthwise 1-D, the fast variant: persistent blocks, cp.async staging, register blocking along L.
//
// Work item = (row group of RB consecutive rows, segment of SEG = TPR·TL consecutive outputs). A block takes
// row groups blockIdx.x, + gridDim.x, ... and all segments of each; the launcher picks gridDim.x so that
// gridDim.x·RB is a multiple of C (or one pass covers every group): a thread's channel never changes, so
// its KE taps (fwd/dgrad) or its KE weight-gradient sums (wgrad) stay in registers for the whole kernel.
//
// Staging: the item's RB rows × [seg0 − HP, seg0 + SEG) window (HP = KE−1 rounded up to 4; 0 when HALO is
// false, which needs one segment per row and TPR = 1) is copied with cp.async — 16-byte copies when
// VEC = 4 (L % 4 == 0: every row is 16-byte aligned), else 4-byte — zero-filled outside [0, L) and past
// the last row, into a row pitch PITCH (≥ HP + SEG, multiple of 4, chosen against bank conflicts).
// STAGES = 2 issues item k+1's copies before computing item k.
//
// Compute: thread (rb, tp) owns outputs [tl0, tl0 + TL), tl0 = seg0 + tp·TL, and reads its window as
// float4s from shared memory; every (input, output) pair is a compile-time index, so only the taps that
// exist are generated. The item at tl0 = 0 takes a peeled copy that skips the causal zeros.
//   fwd:   acc[t] += w[j] · x[τ]            (j = tl0 + t − τ)
//   dgrad: the same in reversed time τ' = L−1−τ: dx is the causal convolution of the reversed dy with the
//          same taps. Reversal is folded into the copies: 16-byte chunks are copied unchanged from the
//          mirrored address and read back with their four lanes swapped (SWZ = 3), a compile-time swizzle.
//   wgrad: dw[j] += dy[t] · x[τ], dy staged in a second buffer; at the end the TPR lanes of a row are
//          summed with shuffles (fixed order) and lane tp = 0 writes slot blockIdx.x·RB + rb of the
//          partials [P, C, KE] (slot = p·C + c) or adds atomically into dw[c, :KE].
// fwd/dgrad results go back through the stage buffer so the global stores are coalesced 16-byte stores.
//
// Storage type T (storage.cuh): float, or half16 / bfloat16 with fp32 taps, sums and accumulators. Shared
// memory holds T as stored (copies of VEC elements: 16 bytes for float, 8 for 16-bit types; a single 16-bit
// element is a plain load); window reads are 4-element vector reads converted to float; fwd/dgrad results are
// rounded to T once, in the stage buffer. wgrad writes fp32 (partials, or atomics into an fp32 dw or, for
// 16-bit storage, an fp32 workspace that dw_reduce converts).
#include "depthwise/dw1d_common.cuh"
#include "common.cuh"
#include "storage.cuh"

namespace convtune {
namespace dw {

template <int PATH_, int KE_, int TL_, int TPR_, int RB_, int VEC_, bool HALO_, int STAGES_, int PITCH_, bool ATOMIC_,
          class T_ = float>
struct FastTraits {
  using T = T_;                                                    // storage type of x, w, dy, y, dx
  using Out = typename select_type<PATH_ == PATH_WGRAD, float, T_>::type;  // wgrad: fp32 sums
  static constexpr int PATH = PATH_, KE = KE_, TL = TL_, TPR = TPR_, RB = RB_, VEC = VEC_, STAGES = STAGES_;
  static constexpr int PITCH = PITCH_;
  static constexpr bool HALO = HALO_, ATOMIC = ATOMIC_;
  static constexpr int THREADS = RB * TPR;
  static constexpr int SEG = TL * TPR;
  static constexpr int HP = HALO ? round_up4(KE - 1) : 0;
  static constexpr int SPAN = HP + SEG;
  static constexpr int BUF_ELEMS = RB * PITCH;
  static constexpr int STAGE_ELEMS = (PATH == PATH_WGRAD ? 2 : 1) * BUF_ELEMS;
  static constexpr bool REVERSE = PATH == PATH_DGRAD;
  static constexpr int SWZ = (REVERSE && VEC == 4) ? 3 : 0;
  static_assert(TL % 4 == 0, "TL must be a multiple of 4");
  static_assert(PITCH % 4 == 0 && PITCH >= SPAN, "PITCH must be a multiple of 4 covering the window");
  static_assert(HALO || TPR == 1, "HALO=false needs one thread per row");
  static_assert(THREADS % 32 == 0 && THREADS <= 1024, "whole warps, at most 1024 threads");
  static_assert(TPR <= 32 && (TPR & (TPR - 1)) == 0, "TPR: a power of two <= 32");
  static_assert(VEC == 1 || VEC == 4, "VEC: 1 or 4");
  static_assert(STAGES == 1 || STAGES == 2, "STAGES: 1 or 2");
};

// Copy the rel indices [LO, SPAN) of the item's rows into buf; rel index i holds time a0 + i (reversed time
// for dgrad, where a 16-byte chunk keeps its memory order: its lanes are read back swizzled).
template <class Tr, int LO>
__device__ __forceinline__ void fast_stage(typename Tr::T* buf, const typename Tr::T* __restrict__ src, int r0,
                                           int a0, int NR, int L) {
  constexpr int W = Tr::VEC;
  constexpr int CNT = (Tr::SPAN - LO) / W;  // copies per row
  static_assert(LO % 4 == 0, "chunk-aligned");
  for (int i = threadIdx.x; i < Tr::RB * CNT; i += Tr::THREADS) {
    const int rr = i / CNT, q = i - (i / CNT) * CNT;
    const int rel = LO + W * q, tt = a0 + rel, row = r0 + rr;
    const bool ok = row < NR && tt >= 0 && tt < L;  // VEC = 4: L % 4 == 0, so tt < L covers the chunk
    const int off = ok ? row * L + (Tr::REVERSE ? L - W - tt : tt) : 0;
    cp_async_elems<W>(buf + rr * Tr::PITCH + rel, src + off, ok);
  }
}

// Issue the copies of item k (row group blockIdx.x + (k / nseg)·gridDim.x, segment k % nseg) into stage s.
template <class Tr>
__device__ __forceinline__ void fast_issue(typename Tr::T* smem, int s, int k, const typename Tr::T* __restrict__ a,
                                           const typename Tr::T* __restrict__ b_in, int NR, int L, int nseg) {
  const int g = blockIdx.x + (k / nseg) * gridDim.x, sg = k - (k / nseg) * nseg;
  const int r0 = g * Tr::RB, a0 = sg * Tr::SEG - Tr::HP;
  typename Tr::T* buf = smem + s * Tr::STAGE_ELEMS;
  fast_stage<Tr, 0>(buf, a, r0, a0, NR, L);
  if (Tr::PATH == PATH_WGRAD) fast_stage<Tr, Tr::HP>(buf + Tr::BUF_ELEMS, b_in, r0, a0, NR, L);
  cp_async_commit();
}

// Window element e of thread tp ↔ time tl0 − HP + e; PEEL skips e < HP (negative times: tl0 = 0).
// Calls f(t, j, value) for every pair with j = t + HP − e in [0, KE): compile-time t and j.
template <class Tr, bool PEEL, class F>
__device__ __forceinline__ void fast_window(const typename Tr::T* xb, F&& f) {
#pragma unroll
  for (int qq = PEEL ? Tr::HP / 4 : 0; qq < (Tr::HP + Tr::TL) / 4; ++qq) {
    float vv[4];
    load4_f32(xb + 4 * qq, vv);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int e = 4 * qq + i;
      const float xv = vv[i ^ Tr::SWZ];
#pragma unroll
      for (int t = 0; t < Tr::TL; ++t) {
        const int j = t + Tr::HP - e;
        if (j >= 0 && j < Tr::KE) f(t, j, xv);
      }
    }
  }
}

template <class Tr>
__device__ __forceinline__ void fast_body(const typename Tr::T* __restrict__ a, const typename Tr::T* __restrict__ b_in,
                                          typename Tr::Out* __restrict__ out, int NR, int C, int L, int K,
                                          int ngroups, int nseg) {
  using T = typename Tr::T;
  extern __shared__ __align__(16) unsigned char dw_smem[];
  T* smem = reinterpret_cast<T*>(dw_smem);
  const int rb = threadIdx.x / Tr::TPR, tp = threadIdx.x - (threadIdx.x / Tr::TPR) * Tr::TPR;
  const int row0 = blockIdx.x * Tr::RB + rb;  // the thread's first row: its channel for the whole kernel
  const int c = row0 % C;
  float wr[Tr::KE];  // fwd/dgrad taps; wgrad sums
#pragma unroll
  for (int j = 0; j < Tr::KE; ++j) {
    wr[j] = (Tr::PATH != PATH_WGRAD && row0 < NR) ? ldg_f32(b_in + c * K + j) : 0.f;
  }
  const int n_items = (ngroups - blockIdx.x + gridDim.x - 1) / gridDim.x * nseg;
  if (n_items > 0) fast_issue<Tr>(smem, 0, 0, a, b_in, NR, L, nseg);
  for (int k = 0; k < n_items; ++k) {
    const int s = Tr::STAGES == 2 ? (k & 1) : 0;
    if (Tr::STAGES == 2) {
      if (k + 1 < n_items) {
        fast_issue<Tr>(smem, s ^ 1, k + 1, a, b_in, NR, L, nseg);
      } else {
        cp_async_commit();  // an empty group keeps wait_group<1> meaning "item k has landed"
      }
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int g = blockIdx.x + (k / nseg) * gridDim.x, sg = k - (k / nseg) * nseg;
    const int row = g * Tr::RB + rb, seg0 = sg * Tr::SEG, tl0 = seg0 + tp * Tr::TL;
    T* buf = smem + s * Tr::STAGE_ELEMS;
    const T* xb = buf + rb * Tr::PITCH + tp * Tr::TL;
    const bool active = row < NR && tl0 < L;
    if constexpr (Tr::PATH == PATH_WGRAD) {
      if (active) {
        float d[Tr::TL];
        const T* db = buf + Tr::BUF_ELEMS + rb * Tr::PITCH + Tr::HP + tp * Tr::TL;
#pragma unroll
        for (int q = 0; q < Tr::TL / 4; ++q) {
          float v[4];
          load4_f32(db + 4 * q, v);
          d[4 * q] = v[0], d[4 * q + 1] = v[1], d[4 * q + 2] = v[2], d[4 * q + 3] = v[3];
        }
        auto f = [&](int t, int j, float xv) { wr[j] = fmaf(d[t], xv, wr[j]); };
        if (!Tr::HALO || tl0 == 0) {
          fast_window<Tr, true>(xb, f);
        } else {
          fast_window<Tr, false>(xb, f);
        }
      }
      __syncthreads();  // stage s is free
    } else {
      float acc[Tr::TL];
#pragma unroll
      for (int t = 0; t < Tr::TL; ++t) acc[t] = 0.f;
      if (active) {
        auto f = [&](int t, int j, float xv) { acc[t] = fmaf(wr[j], xv, acc[t]); };
        if (!Tr::HALO || tl0 == 0) {
          fast_window<Tr, true>(xb, f);
        } else {
          fast_window<Tr, false>(xb, f);
        }
      }
      __syncthreads();  // every window read: overwrite the outputs' positions with the results
      T* ob = buf + rb * Tr::PITCH + Tr::HP + tp * Tr::TL;
#pragma unroll
      for (int q = 0; q < Tr::TL / 4; ++q) {
        store4_f32(ob + 4 * q, acc[4 * q + (0 ^ Tr::SWZ)], acc[4 * q + (1 ^ Tr::SWZ)], acc[4 * q + (2 ^ Tr::SWZ)],
                   acc[4 * q + (3 ^ Tr::SWZ)]);
      }
      __syncthreads();
      constexpr int W = Tr::VEC, CNT = Tr::SEG / W;
      for (int i = threadIdx.x; i < Tr::RB * CNT; i += Tr::THREADS) {
        const int rr = i / CNT, q = i - (i / CNT) * CNT;
        const int orow = g * Tr::RB + rr, tt = seg0 + W * q;
        if (orow >= NR || tt >= L) continue;
        const int off = orow * L + (Tr::REVERSE ? L - W - tt : tt);
        const T* sb = buf + rr * Tr::PITCH + Tr::HP + W * q;
        if (W == 4) {
          copy4(out + off, sb);
        } else {
          out[off] = *sb;
        }
      }
      __syncthreads();  // stage s is free
    }
    if (Tr::STAGES == 1 && k + 1 < n_items) fast_issue<Tr>(smem, 0, k + 1, a, b_in, NR, L, nseg);
  }
  if constexpr (Tr::PATH == PATH_WGRAD) {
    if (Tr::TPR > 1) {  // lanes rb·TPR .. rb·TPR + TPR − 1 hold one row's sums: add them, fixed order
#pragma unroll
      for (int off = Tr::TPR / 2; off > 0; off >>= 1) {
#pragma unroll
        for (int j = 0; j < Tr::KE; ++j) wr[j] += __shfl_down_sync(0xffffffffu, wr[j], off, Tr::TPR);
      }
    }
    if (tp == 0) {
      if (Tr::ATOMIC) {
        if (row0 < NR) {
#pragma unroll
          for (int j = 0; j < Tr::KE; ++j) atomicAdd(out + c * K + j, wr[j]);
        }
      } else {  // slot row0 = p·C + c of [P, C, KE]; idle slots write their zeros
#pragma unroll
        for (int j = 0; j < Tr::KE; ++j) out[row0 * Tr::KE + j] = wr[j];
      }
    }
  }
}

}  // namespace dw
}  // namespace convtune
