// Implicit-GEMM convolution forward on Hopper's warpgroup MMA (wgmma, sm_90a): TF32 products, fp32 accumulation,
// fp32 NCHW in and out.
//
//   y[n,k,p,q] = sum_{c,r,s} x[n, c, p*SH - PH + r*DH, q*SW - PW + s*DW] * w[k, c, r, s]   (zero outside x)
//
// GEMM: M = N*P*Q output pixels (rows), N_gemm = K output channels (columns), reduction kr = c*R*S + r*S + s over
// KR = C*R*S, walked in chunks of 32 (one 128-byte row of TF32 words per pixel / channel).
//
// The filter operand `filt` (igemm_wgmma_pack): B as K rows of KRp = roundup(KR, 32) words, K-major (the weight
// tensor's own order), rounded to TF32 (cvt.rna), zero for kr >= KR; after it (word K*KRp) the gather table, one
// int4 per kr < KRp: {c*H*W + r*DH*W + s*DW, r*DH, s*DW, 0}; rows kr >= KR hold dh = -2^29 (their taps fail the
// bounds test and read nothing).
//
// Shared memory, STAGES stages of [A: BM rows x 128 B][B: BN rows x 128 B], every tile 1024-byte aligned, both
// K-major with the 128-byte swizzle (SWZ = 1: the 16-byte chunk j of row r sits at chunk j ^ (r % 8)) or the
// unswizzled core-matrix layout (SWZ = 0: 8 x 16-byte core matrices, row-groups SBO = 1024 B apart, k-groups 128 B).
// A (the im2col rows) is gathered with 4-byte zero-filling cp.async: lane (i = lane % 8, j = lane / 8) copies pixel
// 8*g + i, word 4*h + j, so a warp's 32 stores hit 32 distinct banks and its loads are 4 runs of 8 pixels.
// B is copied 16 bytes at a time.
//
// Compute: WG warpgroups (128 threads each) split the BM rows; each owns MI m64 blocks and issues
// wgmma.mma_async.m64nBNk8 with A from registers (read from shared memory and rounded to TF32 with cvt.rna, as
// cuDNN/cuBLAS round) and B from a shared-memory descriptor; 4 k-steps per chunk, one commit group per chunk,
// drained before the next barrier. Loads run STAGES - 1 chunks ahead (cp.async groups). gridDim.z > 1 splits the
// reduction; each split adds its tile into y (zeroed first) with atomics.
#include "wgmma_tf32.cuh"

namespace convtune {

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ unsigned tf32_bits(float v) {
  unsigned out;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(out) : "f"(v));
  return out;
}

__device__ __forceinline__ void cp_async4_zfill(unsigned dst, const void* src, bool ok) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(ok ? 4 : 0));
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

__device__ __forceinline__ float lds_f32(unsigned addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(addr));
  return v;
}

// Byte offset of word k (0..31) of row r in a K-major tile.
template <int SWZ>
__device__ __forceinline__ unsigned tile_offset(int r, int k) {
  if constexpr (SWZ == 1) {
    return static_cast<unsigned>(r * 128 + (((k >> 2) ^ (r & 7)) << 4) + ((k & 3) << 2));
  } else {
    return static_cast<unsigned>((r >> 3) * 1024 + (k >> 2) * 128 + (r & 7) * 16 + ((k & 3) << 2));
  }
}

// Matrix descriptor of a K-major tile starting at shared address `addr`, advanced by k-step `ks` (8 words).
template <int SWZ, int LBO, int SBO>
__device__ __forceinline__ unsigned long long tile_desc(unsigned addr, int ks) {
  const unsigned start = SWZ == 1 ? addr + ks * 32 : addr + ks * 256;
  return static_cast<unsigned long long>((start & 0x3FFFF) >> 4) |
         (static_cast<unsigned long long>(LBO >> 4) << 16) | (static_cast<unsigned long long>(SBO >> 4) << 32) |
         (static_cast<unsigned long long>(SWZ == 1 ? 1 : 0) << 62);
}

template <int BN>
__device__ __forceinline__ void wgmma_tf32(float* d, const unsigned* a, unsigned long long desc) {
  if constexpr (BN == 64) {
    wgmma_tf32_m64n64(d, a, desc);
  } else if constexpr (BN == 128) {
    wgmma_tf32_m64n128(d, a, desc);
  } else {
    static_assert(BN == 256, "BN is 64, 128 or 256");
    wgmma_tf32_m64n256(d, a, desc);
  }
}

// One thread per word of the filter operand: Kc rows of KRp TF32 words, then the KRp-entry gather table.
__device__ __forceinline__ void igemm_wgmma_pack_body(const float* __restrict__ w, float* __restrict__ filt, int K,
                                                      int C, int R, int S, int H, int W, int DH, int DW, int KRp) {
  const int KR = C * R * S;
  const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long words = static_cast<long long>(K) * KRp;
  if (idx < words) {
    const int n = static_cast<int>(idx / KRp), kr = static_cast<int>(idx % KRp);
    const float v = kr < KR ? w[static_cast<long long>(n) * KR + kr] : 0.0f;
    filt[idx] = __uint_as_float(tf32_bits(v));
  } else if (idx < words + KRp) {
    const int kr = static_cast<int>(idx - words);
    int4 e = make_int4(0, -(1 << 29), 0, 0);
    if (kr < KR) {
      const int c = kr / (R * S), r = (kr / S) % R, s = kr % S;
      e = make_int4(c * H * W + r * DH * W + s * DW, r * DH, s * DW, 0);
    }
    reinterpret_cast<int4*>(filt + words)[kr] = e;
  }
}

template <int BN, int MI, int WG, int STAGES, int SWZ, int LBO, int SBO, int AORD>
__device__ __forceinline__ void igemm_wgmma_fwd_body(const float* __restrict__ x, const float* __restrict__ filt,
                                                     float* __restrict__ y, int N, int C, int H, int W, int K, int P,
                                                     int Q, int SH, int SW, int PH, int PW, int KRp,
                                                     int chunks_per_split) {
  constexpr int THREADS = 128 * WG, BM = 64 * WG * MI, PIX = 2 * MI;
  constexpr int A_BYTES = BM * 128, B_BYTES = BN * 128, STAGE_BYTES = A_BYTES + B_BYTES;
  constexpr int B_COPIES = BN * 8 / THREADS;
  static_assert(BN * 8 % THREADS == 0, "B copies divide among the threads");
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned smem0 = (smem_u32(smem_raw) + 1023u) & ~1023u;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int PQ = P * Q;
  const long long M = static_cast<long long>(N) * PQ;
  const long long m0 = static_cast<long long>(blockIdx.x) * BM;
  const int n0 = blockIdx.y * BN;
  const int chunks_total = KRp / 32;
  const int chunk0 = blockIdx.z * chunks_per_split;
  const int nchunks = min(chunks_total - chunk0, chunks_per_split);
  const int4* table = reinterpret_cast<const int4*>(filt + static_cast<long long>(K) * KRp);

  // the pixels this thread gathers: rows 8 * (warp * PIX + i) + lane % 8
  long long pix_base[PIX];
  int pix_h0[PIX], pix_w0[PIX];
#pragma unroll
  for (int i = 0; i < PIX; ++i) {
    const long long m = m0 + 8 * (warp * PIX + i) + (lane & 7);
    pix_base[i] = 0;
    pix_h0[i] = -(1 << 29);
    pix_w0[i] = 0;
    if (m < M) {
      const int img = static_cast<int>(m / PQ), pq = static_cast<int>(m % PQ);
      const int h0 = (pq / Q) * SH - PH, w0 = (pq % Q) * SW - PW;
      pix_h0[i] = h0;
      pix_w0[i] = w0;
      pix_base[i] = static_cast<long long>(img) * C * H * W + static_cast<long long>(h0) * W + w0;
    }
  }

  auto load_stage = [&](int stage, int chunk) {
    const unsigned sA = smem0 + stage * STAGE_BYTES, sB = sA + A_BYTES;
    const int kbase = chunk * 32;
#pragma unroll
    for (int kh = 0; kh < 8; ++kh) {
      const int k = kh * 4 + (lane >> 3);
      const int4 e = __ldg(table + kbase + k);
#pragma unroll
      for (int i = 0; i < PIX; ++i) {
        const int row = 8 * (warp * PIX + i) + (lane & 7);
        const int h = pix_h0[i] + e.y, w = pix_w0[i] + e.z;
        const bool ok = static_cast<unsigned>(h) < static_cast<unsigned>(H) &&
                        static_cast<unsigned>(w) < static_cast<unsigned>(W);
        cp_async4_zfill(sA + tile_offset<SWZ>(row, k), ok ? x + (pix_base[i] + e.x) : x, ok);
      }
    }
#pragma unroll
    for (int j = 0; j < B_COPIES; ++j) {
      const int idx = tid + j * THREADS;
      const int row = idx >> 3, c = idx & 7;
      const bool ok = n0 + row < K;
      const float* src = filt + static_cast<long long>(ok ? n0 + row : 0) * KRp + kbase + c * 4;
      cp_async16_zfill(sB + tile_offset<SWZ>(row, c * 4), src, ok);
    }
  };

  float acc[MI][BN / 2];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int j = 0; j < BN / 2; ++j) acc[mi][j] = 0.0f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < nchunks) load_stage(s, chunk0 + s);
    cp_async_commit();
  }

  const int wg = warp >> 2, wq = warp & 3, g = lane >> 2, t = lane & 3;
  for (int it = 0; it < nchunks; ++it) {
    cp_async_wait<STAGES - 2>();
    fence_proxy_async();  // the copies' shared-memory words, read next by the tensor cores (async proxy)
    __syncthreads();      // every thread's copies landed; every warpgroup drained the chunk before (stage reuse)
    {
      const int next = it + STAGES - 1;
      if (next < nchunks) load_stage(next % STAGES, chunk0 + next);
      cp_async_commit();
    }
    const unsigned sA = smem0 + (it % STAGES) * STAGE_BYTES, sB = sA + A_BYTES;
    unsigned a[MI][4][4];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const int r0 = wg * (BM / WG) + mi * 64 + wq * 16 + g;
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        const int k0 = ks * 8 + t;
        const unsigned v00 = tf32_bits(lds_f32(sA + tile_offset<SWZ>(r0, k0)));
        const unsigned v10 = tf32_bits(lds_f32(sA + tile_offset<SWZ>(r0 + 8, k0)));
        const unsigned v01 = tf32_bits(lds_f32(sA + tile_offset<SWZ>(r0, k0 + 4)));
        const unsigned v11 = tf32_bits(lds_f32(sA + tile_offset<SWZ>(r0 + 8, k0 + 4)));
        if constexpr (AORD == 0) {  // a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4)
          a[mi][ks][0] = v00; a[mi][ks][1] = v10; a[mi][ks][2] = v01; a[mi][ks][3] = v11;
        } else {
          a[mi][ks][0] = v00; a[mi][ks][1] = v01; a[mi][ks][2] = v10; a[mi][ks][3] = v11;
        }
      }
    }
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) wgmma_tf32<BN>(acc[mi], a[mi][ks], tile_desc<SWZ, LBO, SBO>(sB, ks));
    wgmma_commit();
    wgmma_wait<0>();
  }

  // accumulator (m64nN layout): acc[j*4 + 2*e2 + e1] = row 16*wq + g + 8*e2, column 8*j + 2*t + e1
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


// ---- channels-last variant: A and B both read by the tensor cores from shared memory -------------------------
//
// xt (N, H, W, Cp): x transposed to channels-last, channels padded to Cp = roundup(C, 32) with zeros and rounded
// to TF32 (igemm_wgmma_nhwc_transform), so a chunk of the reduction is 32 channels of one tap (r, s): each pixel's
// row is 128 contiguous bytes, copied as 8 x 16-byte cp.async (zero-filled where the tap meets padding).
// The filter operand: K rows of KRp = R*S*Cp TF32 words in (r, s, c) order (igemm_wgmma_nhwc_pack).
// Pipeline: loads run STAGES - 2 chunks ahead; one wgmma group stays in flight while the next chunk's copies are
// issued (wgmma.wait_group 1), so the tensor cores never wait for a drained queue between chunks.

// One block per (image, 32 channels, 32 pixels): x (N, C, HW) -> xt (N, HW, Cp), TF32-rounded, zero channels >= C.
__device__ __forceinline__ void igemm_wgmma_nhwc_transform_body(const float* __restrict__ x, float* __restrict__ xt,
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
__device__ __forceinline__ void igemm_wgmma_nhwc_pack_body(const float* __restrict__ w, float* __restrict__ filt,
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
__device__ __forceinline__ void igemm_wgmma_nhwc_body(const float* __restrict__ xt, const float* __restrict__ filt,
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
      cp_async16_zfill(sA + tile_offset<1>(row, piece * 4), src, ok);
    }
    const int kbase = chunk * 32;
#pragma unroll
    for (int j = 0; j < B_COPIES; ++j) {
      const int idx = tid + j * THREADS;
      const int row = idx >> 3, c = idx & 7;
      const bool ok = n0 + row < K;
      const float* src = filt + static_cast<long long>(ok ? n0 + row : 0) * KRp + kbase + c * 4;
      cp_async16_zfill(sB + tile_offset<1>(row, c * 4), src, ok);
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
        const unsigned long long ad = tile_desc<1, 16, 1024>(sA + mi * 64 * 128, ks);
        const unsigned long long bd = tile_desc<1, 16, 1024>(sB, ks);
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
