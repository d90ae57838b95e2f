// convtune-arch: sm_90a   (wgmma assembles only for the arch-specific Hopper target)
//
// Implicit-GEMM convolution forward on Hopper's warpgroup MMA (wgmma): TF32 products, fp32 accumulation, fp32 NCHW
// in and out.
//
//   y[n,k,p,q] = sum_{c,r,s} x[n, c, p*SH - PH + r*DH, q*SW - PW + s*DW] * w[k, c, r, s]   (zero outside x)
//
// GEMM: M = N*P*Q output pixels (rows) x K output channels (columns), the reduction over (r, s, c) in chunks of 32
// channels of one tap, Cp = roundup(C, 32) channels per tap, KRp = R*S*Cp.
//
// Three kernels:
//   igemm_wgmma_to_nhwc  x (N, C, H, W) -> xt (N, H, W, Cp), rounded to TF32 (cvt.rna, as cuDNN and cuBLAS round),
//                        zero for c >= C: each pixel's 32 channels of a chunk are 128 contiguous bytes;
//   igemm_wgmma_pack     w (K, C, R, S) -> filt (K, KRp), filt[k][(r*S + s)*Cp + c] = tf32(w[k][c][r][s]), once per
//                        weight tensor;
//   igemm_wgmma_fwd      the GEMM.
//
// Shared memory: STAGES stages of [A: BM rows x 128 B][B: BN rows x 128 B], 1024-byte aligned, K-major with the
// 128-byte swizzle (16-byte piece j of row r at piece j ^ (r % 8)), which is the layout the matrix descriptors name
// (layout type 1, SBO = 1024 B between 8-row groups; a k-step of 8 words advances the start address by 32 B).
// Copies: 16-byte zero-filling cp.async (a tap in the padding reads nothing), 8 threads per 128-byte row (conflict-
// free). Compute: WG warpgroups split the BM rows, each issues MI m64nBNk8 wgmma per k-step with A and B from
// shared memory; one commit group per chunk stays in flight while the next chunk's copies are issued
// (wgmma.wait_group 1), loads run STAGES - 2 chunks ahead. gridDim.z > 1 splits the reduction; each split adds its
// tile into y (zeroed first) with atomics.
#include "wgmma_tf32_ss.cuh"

namespace convtune {

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ unsigned tf32_bits(float v) {
  unsigned out;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(out) : "f"(v));
  return out;
}


__device__ __forceinline__ void cp_async16_zfill(unsigned dst, const void* src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(ok ? 16 : 0));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}


// Byte offset of word k (0..31) of row r in a K-major tile with the 128-byte swizzle.
__device__ __forceinline__ unsigned swizzled_offset(int r, int k) {
  return static_cast<unsigned>(r * 128 + (((k >> 2) ^ (r & 7)) << 4) + ((k & 3) << 2));
}

// Matrix descriptor of a 128-byte-swizzled K-major tile at shared address `addr` (1024-byte aligned), advanced by
// k-step `ks` (8 TF32 words = 32 bytes): start >> 4 (bits 0-13), leading offset 16 B (unused by swizzled K-major
// layouts; bits 16-29), stride offset 1024 B between 8-row groups (bits 32-45), layout type 1 = 128B swizzle (62-63).
__device__ __forceinline__ unsigned long long swizzled_desc(unsigned addr, int ks) {
  const unsigned start = addr + ks * 32;
  return static_cast<unsigned long long>((start & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}

// One block per (image, 32 channels, 32 pixels): x (N, C, HW) -> xt (N, HW, Cp), TF32-rounded, zero channels >= C.
__device__ __forceinline__ void igemm_wgmma_to_nhwc_body(const float* __restrict__ x, float* __restrict__ xt,
                                                                int C, int HW, int Cp) {
  __shared__ float tile[32][33];
  const int img = blockIdx.z, c0 = blockIdx.y * 32, p0 = blockIdx.x * 32;
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;  // 256 threads: 8 rows per pass
  const float* xs = x + static_cast<long long>(img) * C * HW;
#pragma unroll
  for (int i = ty; i < 32; i += 8) {
    const int c = c0 + i, p = p0 + tx;
    tile[i][tx] = (c < C && p < HW) ? __ldg(xs + static_cast<long long>(c) * HW + p) : 0.0f;
  }
  __syncthreads();
  float* xd = xt + static_cast<long long>(img) * HW * Cp;
#pragma unroll
  for (int i = ty; i < 32; i += 8) {
    const int p = p0 + i, c = c0 + tx;
    if (p < HW && c < Cp) xd[static_cast<long long>(p) * Cp + c] = __uint_as_float(tf32_bits(tile[tx][i]));
  }
}

// One thread per word: filt[n][(r*S + s)*Cp + c] = tf32(w[n][c][r][s]), zero for c >= C.
__device__ __forceinline__ void igemm_wgmma_pack_body(const float* __restrict__ w, float* __restrict__ filt,
                                                           int K, int C, int R, int S, int Cp) {
  const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long KRp = static_cast<long long>(R) * S * Cp;
  if (idx >= K * KRp) return;
  const int n = static_cast<int>(idx / KRp), rest = static_cast<int>(idx % KRp);
  const int tap = rest / Cp, c = rest % Cp;
  const float v = c < C ? w[((static_cast<long long>(n) * C + c) * R + tap / S) * S + tap % S] : 0.0f;
  filt[idx] = __uint_as_float(tf32_bits(v));
}

template <int BN, int MI, int WG, int STAGES>
__device__ __forceinline__ void igemm_wgmma_fwd_body(const float* __restrict__ xt, const float* __restrict__ filt,
                                                      float* __restrict__ y, int N, int Cp, int H, int W, int K,
                                                      int P, int Q, int S, int SH, int SW, int PH, int PW, int DH,
                                                      int DW, int KRp, int chunks_per_split) {
  constexpr int THREADS = 128 * WG, BM = 64 * WG * MI;
  constexpr int A_BYTES = BM * 128, B_BYTES = BN * 128, STAGE_BYTES = A_BYTES + B_BYTES;
  constexpr int A_ROWS = BM * 8 / THREADS, B_COPIES = BN * 8 / THREADS;  // per thread
  static_assert(STAGES >= 3, "one stage computing, one in flight in the tensor cores, one loading");
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned smem0 = (smem_u32(smem_raw) + 1023u) & ~1023u;

  const int tid = threadIdx.x, warp = tid >> 5;
  const int PQ = P * Q;
  const long long M = static_cast<long long>(N) * PQ;
  const long long m0 = static_cast<long long>(blockIdx.x) * BM;
  const int n0 = blockIdx.y * BN;
  const int cblocks = Cp / 32;
  const int chunks_total = KRp / 32;
  const int chunk0 = blockIdx.z * chunks_per_split;
  const int nchunks = min(chunks_total - chunk0, chunks_per_split);

  // this thread copies 16-byte piece tid % 8 of rows tid / 8 + j * THREADS / 8
  const int piece = tid & 7;
  long long pix_base[A_ROWS];
  int pix_h0[A_ROWS], pix_w0[A_ROWS];
#pragma unroll
  for (int j = 0; j < A_ROWS; ++j) {
    const long long m = m0 + (tid >> 3) + j * (THREADS / 8);
    pix_base[j] = 0;
    pix_h0[j] = -(1 << 29);
    pix_w0[j] = 0;
    if (m < M) {
      const int img = static_cast<int>(m / PQ), pq = static_cast<int>(m % PQ);
      pix_h0[j] = (pq / Q) * SH - PH;
      pix_w0[j] = (pq % Q) * SW - PW;
      pix_base[j] = static_cast<long long>(img) * H * W * Cp + piece * 4;
    }
  }

  auto load_stage = [&](int stage, int chunk) {
    const unsigned sA = smem0 + stage * STAGE_BYTES, sB = sA + A_BYTES;
    const int tap = chunk / cblocks, cb = chunk - tap * cblocks;
    const int dh = (tap / S) * DH, dw = (tap % S) * DW;
#pragma unroll
    for (int j = 0; j < A_ROWS; ++j) {
      const int row = (tid >> 3) + j * (THREADS / 8);
      const int h = pix_h0[j] + dh, w = pix_w0[j] + dw;
      const bool ok = static_cast<unsigned>(h) < static_cast<unsigned>(H) &&
                      static_cast<unsigned>(w) < static_cast<unsigned>(W);
      const float* src = ok ? xt + pix_base[j] + (static_cast<long long>(h) * W + w) * Cp + cb * 32 : xt;
      cp_async16_zfill(sA + swizzled_offset(row, piece * 4), src, ok);
    }
    const int kbase = chunk * 32;
#pragma unroll
    for (int j = 0; j < B_COPIES; ++j) {
      const int idx = tid + j * THREADS;
      const int row = idx >> 3, c = idx & 7;
      const bool ok = n0 + row < K;
      const float* src = filt + static_cast<long long>(ok ? n0 + row : 0) * KRp + kbase + c * 4;
      cp_async16_zfill(sB + swizzled_offset(row, c * 4), src, ok);
    }
  };

  float acc[MI][BN / 2];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int j = 0; j < BN / 2; ++j) acc[mi][j] = 0.0f;

#pragma unroll
  for (int s = 0; s < STAGES - 2; ++s) {
    if (s < nchunks) load_stage(s, chunk0 + s);
    cp_async_commit();
  }

  const int wg = warp >> 2;
  for (int it = 0; it < nchunks; ++it) {
    cp_async_wait<STAGES - 3>();
    fence_proxy_async();  // the copies' words, read next by the tensor cores (async proxy)
    __syncthreads();      // all copies of chunk it landed; every warpgroup retired chunk it - 2 (stage reuse)
    {
      const int next = it + STAGES - 2;
      if (next < nchunks) load_stage(next % STAGES, chunk0 + next);
      cp_async_commit();
    }
    const unsigned sA = smem0 + (it % STAGES) * STAGE_BYTES + wg * (BM / WG) * 128, sB = smem0 + (it % STAGES) *
                        STAGE_BYTES + A_BYTES;
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        const unsigned long long ad = swizzled_desc(sA + mi * 64 * 128, ks);
        const unsigned long long bd = swizzled_desc(sB, ks);
        if constexpr (BN == 64) {
          wgmma_tf32_ss_m64n64(acc[mi], ad, bd);
        } else if constexpr (BN == 128) {
          wgmma_tf32_ss_m64n128(acc[mi], ad, bd);
        } else {
          wgmma_tf32_ss_m64n256(acc[mi], ad, bd);
        }
      }
    wgmma_commit();
    wgmma_wait<1>();
  }
  wgmma_wait<0>();

  const int lane = tid & 31, wq = warp & 3, g = lane >> 2, t = lane & 3;
  const bool split = gridDim.z > 1;
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int e2 = 0; e2 < 2; ++e2) {
      const long long m = m0 + wg * (BM / WG) + mi * 64 + wq * 16 + g + 8 * e2;
      if (m >= M) continue;
      const long long img = m / PQ;
      float* yrow = y + img * K * PQ + (m - img * PQ);
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
        for (int e1 = 0; e1 < 2; ++e1) {
          const int col = n0 + 8 * j + 2 * t + e1;
          if (col >= K) continue;
          const float v = acc[mi][j * 4 + 2 * e2 + e1];
          if (split) {
            atomicAdd(yrow + static_cast<long long>(col) * PQ, v);
          } else {
            yrow[static_cast<long long>(col) * PQ] = v;
          }
        }
      }
    }
  }
}

}  // namespace convtune
