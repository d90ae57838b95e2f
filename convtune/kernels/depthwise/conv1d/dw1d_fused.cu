// Causal depthwise 1-D, fused backward: dx and dw from one pass over x and dy (rows of L ≤ 64).
//
//   dx[b,c,s] = Σ_{j<KE, s+j<L} w[c,j] · dy[b,c,s+j]
//   dw[c,j]   = Σ_b Σ_{t=j}^{L−1} dy[b,c,t] · x[b,c,t−j]
//
// The fast kernel's machinery with one thread per whole row (FastTraits with PATH = wgrad, TPR = 1, no
// halo, TL = L rounded up to 4): persistent blocks of RB threads, thread rb ↔ rows blockIdx.x·RB + rb,
// + gridDim.x·RB, … (one channel per thread: its KE taps and its KE weight-gradient sums stay in
// registers); the item's x and dy rows are staged by fast_issue (cp.async, 16-byte copies when VEC = 4,
// zero fill past L and past the last row; STAGES = 2 copies item k+1 during item k). Per row the thread
// reads dy into TL registers d[t], then
//   dx:  for each s, Σ_j w[j]·d[s+j] (compile-time indices: the anti-causal triangle only), written into
//        the row's dy slot in shared memory (its d values are already in registers) and copied out
//        cooperatively with coalesced 16-byte stores;
//   dw:  streams the x row as float4s: dw[j] += d[t]·x[τ] for j = t − τ ∈ [0, KE) (the causal triangle).
// At the end each thread leaves its sums in partial slot blockIdx.x·RB + rb of [P, C, KE] (slot = p·C + c,
// summed by dw_reduce in slot order: bitwise repeatable) or adds them atomically into dw[c, :KE].
// Storage type Tr::T as in the fast kernel: x, dy, w and dx in T, every sum in fp32, dx rounded to T once in
// its shared slot; dw_out is fp32 (partials, an fp32 dw, or the fp32 atomic workspace of 16-bit storage).
#include "depthwise/dw1d_fast.cu"

namespace convtune {
namespace dw {

template <class Tr>
__device__ __forceinline__ void fused_bwd_body(const typename Tr::T* __restrict__ x, const typename Tr::T* __restrict__ dy,
                                               const typename Tr::T* __restrict__ w, typename Tr::T* __restrict__ dx,
                                               float* __restrict__ dw_out, int NR, int C, int L, int K,
                                               int ngroups) {
  static_assert(Tr::PATH == PATH_WGRAD && !Tr::HALO && Tr::TPR == 1, "whole rows, x and dy staged");
  using T = typename Tr::T;
  extern __shared__ __align__(16) unsigned char dw_smem[];
  T* smem = reinterpret_cast<T*>(dw_smem);
  const int rb = threadIdx.x;
  const int row0 = blockIdx.x * Tr::RB + rb;
  const int c = row0 % C;
  float wt[Tr::KE], sums[Tr::KE];
#pragma unroll
  for (int j = 0; j < Tr::KE; ++j) {
    wt[j] = row0 < NR ? ldg_f32(w + c * K + j) : 0.f;
    sums[j] = 0.f;
  }
  const int n_items = (ngroups - blockIdx.x + gridDim.x - 1) / gridDim.x;
  if (n_items > 0) fast_issue<Tr>(smem, 0, 0, x, dy, NR, L, 1);
  for (int k = 0; k < n_items; ++k) {
    const int s = Tr::STAGES == 2 ? (k & 1) : 0;
    if (Tr::STAGES == 2) {
      if (k + 1 < n_items) {
        fast_issue<Tr>(smem, s ^ 1, k + 1, x, dy, NR, L, 1);
      } else {
        cp_async_commit();
      }
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int g = blockIdx.x + k * gridDim.x;
    T* buf = smem + s * Tr::STAGE_ELEMS;
    const T* xb = buf + rb * Tr::PITCH;
    T* db = buf + Tr::BUF_ELEMS + rb * Tr::PITCH;
    if (g * Tr::RB + rb < NR) {
      float d[Tr::TL];
#pragma unroll
      for (int q = 0; q < Tr::TL / 4; ++q) {
        float v[4];
        load4_f32(db + 4 * q, v);
        d[4 * q] = v[0], d[4 * q + 1] = v[1], d[4 * q + 2] = v[2], d[4 * q + 3] = v[3];
      }
#pragma unroll
      for (int q = 0; q < Tr::TL / 4; ++q) {
        float o[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int sx = 4 * q + i;
          float acc = 0.f;
#pragma unroll
          for (int j = 0; j < Tr::KE; ++j) {
            if (sx + j < Tr::TL) acc = fmaf(wt[j], d[sx + j], acc);
          }
          o[i] = acc;
        }
        store4_f32(db + 4 * q, o[0], o[1], o[2], o[3]);
      }
#pragma unroll
      for (int q = 0; q < Tr::TL / 4; ++q) {
        float xv[4];
        load4_f32(xb + 4 * q, xv);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
#pragma unroll
          for (int t = 4 * q + i; t < Tr::TL && t - (4 * q + i) < Tr::KE; ++t) {
            sums[t - (4 * q + i)] = fmaf(d[t], xv[i], sums[t - (4 * q + i)]);
          }
        }
      }
    }
    __syncthreads();  // every dx row is in its dy slot
    constexpr int W = Tr::VEC, CNT = Tr::TL / W;
    for (int i = threadIdx.x; i < Tr::RB * CNT; i += Tr::THREADS) {
      const int rr = i / CNT, q = i - (i / CNT) * CNT;
      const int orow = g * Tr::RB + rr, tt = W * q;
      if (orow >= NR || tt >= L) continue;
      const T* sb = buf + Tr::BUF_ELEMS + rr * Tr::PITCH + tt;
      if (W == 4) {
        copy4(dx + orow * L + tt, sb);
      } else {
        dx[orow * L + tt] = *sb;
      }
    }
    __syncthreads();  // stage s is free
    if (Tr::STAGES == 1 && k + 1 < n_items) fast_issue<Tr>(smem, 0, k + 1, x, dy, NR, L, 1);
  }
  if (Tr::ATOMIC) {
    if (row0 < NR) {
#pragma unroll
      for (int j = 0; j < Tr::KE; ++j) atomicAdd(dw_out + c * K + j, sums[j]);
    }
  } else {
#pragma unroll
    for (int j = 0; j < Tr::KE; ++j) dw_out[row0 * Tr::KE + j] = sums[j];
  }
}

}  // namespace dw
}  // namespace convtune
