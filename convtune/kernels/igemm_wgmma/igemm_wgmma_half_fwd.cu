// convtune-arch: sm_90a   (wgmma assembles only for the arch-specific Hopper target)
//
// Implicit-GEMM convolution forward on Hopper's warpgroup MMA (wgmma) for 16-bit storage: bfloat16 or float16 in
// and out (T = convtune::wg_bf16 / convtune::wg_f16, the bits in 2-byte structs), products exact, fp32
// accumulation, y rounded once to T.
//
//   y[n,k,p,q] = sum_{c,r,s} x[n, c, p*SH - PH + r*DH, q*SW - PW + s*DW] * w[k, c, r, s]   (zero outside x)
//
// GEMM: M = N*P*Q output pixels (rows) x K output channels (columns), the reduction over (r, s, c) in chunks of CH
// channels of one tap (one swizzled row of CHB = 2*CH bytes: CH = 64, 32 or 16), Cp = roundup(C, CH) channels per tap,
// KRp = R*S*Cp. Small chunks serve small C (a stem's C = 3 pads to 16 channels, not 64).
//
// Folded taps (FQ > 0, for stems: C <= FQ = 2, 4 or 8 channels per pixel in the workspace, S*FQ <= CH): a chunk is
// one filter row r, its row holding the S taps side by side, column s*FQ + c (columns >= S*FQ zero in the filters
// and in the shared-memory tiles, zeroed once). Cp = FQ, KRp = R*CH, R chunks; a pixel's tap is one copy of 2*FQ
// bytes (4, 8 or 16), zero-filled outside x. A 7x7 stem with C = 3 computes 7 chunks of 32 columns (21 used)
// instead of 49 chunks of 16 (3 used).
//
// The TF32 kernel's structure (igemm_wgmma_fwd.cu, whose helpers this file includes unchanged) with 16-bit
// elements: a k-step is m64nNk16 (16 elements = 32 bytes of a row, the descriptor's start advanced by 32 B), a
// 16-byte copy is 8 elements, rows of 128 / 64 / 32 bytes with the 128 / 64 / 32-byte swizzle (descriptor layout
// type 1 / 2 / 3, 8-row groups of 8*CHB bytes). The tensor cores are given chunk it before the copies of chunk
// it + STAGES - 2 are issued (the copies' address arithmetic stays off the MMA's critical path). Kernels:
//   igemm_wgmma_to_nhwc_16   x (N, C, H, W) -> xt (N, H, W, Cp), zero for c >= C (a layout change, no rounding;
//                            4-byte accesses of two pixels / two channels where H*W is even);
//   igemm_wgmma_to_nhwc_fold_16  folded: x -> xt (N, H, W, FQ), one thread per pixel (C 2-byte loads, one 2*FQ-byte
//                            store), no block of 32 channel slots for FQ <= 8 channels;
//   igemm_wgmma_pack_16      w (K, C, R, S) -> filt (K, KRp), filt[k][(r*S + s)*Cp + c] = w[k][c][r][s]
//                            (folded: filt[k][r*CH + s*FQ + c] = w[k][c][r][s]);
//   igemm_wgmma_half_fwd     the GEMM: y (N, K, P, Q) in T through a shared-memory staging of the tile (coalesced
//                            NCHW rows), or with gridDim.z > 1 (split reduction) atomics into an fp32 workspace of
//                            y's shape (zeroed first), converted by igemm_wgmma_f32_to_16.
#include "igemm_wgmma_fwd.cu"
#include "wgmma_half_ss.cuh"

namespace convtune {

// One block per (image, 32 channels, 64 pixels), 256 threads: x (N, C, HW) -> xt (N, HW, Cp), zero channels >= C.
// Reads: a warp per channel row, a lane per pixel pair (one 4-byte load where HW is even: rows start at even
// elements); writes: a half-warp per pixel, a lane per channel pair (one 4-byte store; Cp is even).
template <class T>
__device__ __forceinline__ void igemm_wgmma_to_nhwc_16_body(const T* __restrict__ x, T* __restrict__ xt, int C,
                                                            int HW, int Cp) {
  __shared__ unsigned short tile[32][66];   // [channel][pixel]; 66: the write phase's column reads hit 16 banks
  const int img = blockIdx.z, c0 = blockIdx.y * 32, p0 = blockIdx.x * 64;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned short* xs = reinterpret_cast<const unsigned short*>(x) + static_cast<long long>(img) * C * HW;
  const bool even = (HW & 1) == 0;
#pragma unroll
  for (int i = warp; i < 32; i += 8) {
    const int c = c0 + i, p = p0 + 2 * lane;
    unsigned short a = 0, b = 0;
    if (c < C) {
      const unsigned short* row = xs + static_cast<long long>(c) * HW;
      if (even && p + 1 < HW) {
        const unsigned v = __ldg(reinterpret_cast<const unsigned*>(row + p));
        a = static_cast<unsigned short>(v & 0xFFFFu);
        b = static_cast<unsigned short>(v >> 16);
      } else {
        if (p < HW) a = row[p];
        if (p + 1 < HW) b = row[p + 1];
      }
    }
    tile[i][2 * lane] = a;
    tile[i][2 * lane + 1] = b;
  }
  __syncthreads();
  unsigned* xd = reinterpret_cast<unsigned*>(reinterpret_cast<unsigned short*>(xt) +
                                             static_cast<long long>(img) * HW * Cp);
  const int j = lane & 15;                    // channel pair c0 + 2j, c0 + 2j + 1
#pragma unroll
  for (int i = warp * 2 + (lane >> 4); i < 64; i += 16) {
    const int p = p0 + i, c = c0 + 2 * j;
    if (p < HW && c < Cp)
      xd[(static_cast<long long>(p) * Cp + c) >> 1] = static_cast<unsigned>(tile[2 * j][i]) |
                                                      (static_cast<unsigned>(tile[2 * j + 1][i]) << 16);
  }
}

// Folded workspaces: x (N, C, HW) -> xt (N, HW, FQ), zero channels >= C; block (256 pixels of image blockIdx.y), a
// thread per pixel: consecutive threads read consecutive 2-byte pixels of a channel row, then store the pixel's FQ
// channels at once (4, 8 or 16 bytes; xt rows of 2*FQ bytes keep the store aligned).
template <class T, int FQ>
__device__ __forceinline__ void igemm_wgmma_to_nhwc_fold_16_body(const T* __restrict__ x, T* __restrict__ xt, int C,
                                                                 int HW) {
  static_assert(FQ == 2 || FQ == 4 || FQ == 8, "2, 4 or 8 channels a pixel");
  const int p = blockIdx.x * blockDim.x + threadIdx.x, img = blockIdx.y;
  if (p >= HW) return;
  const unsigned short* xs = reinterpret_cast<const unsigned short*>(x) + static_cast<long long>(img) * C * HW + p;
  unsigned v[FQ / 2];
#pragma unroll
  for (int i = 0; i < FQ / 2; ++i) {
    const unsigned lo = 2 * i < C ? __ldg(xs + static_cast<long long>(2 * i) * HW) : 0u;
    const unsigned hi = 2 * i + 1 < C ? __ldg(xs + static_cast<long long>(2 * i + 1) * HW) : 0u;
    v[i] = lo | (hi << 16);
  }
  T* dst = xt + (static_cast<long long>(img) * HW + p) * FQ;
  if constexpr (FQ == 2) {
    *reinterpret_cast<unsigned*>(dst) = v[0];
  } else if constexpr (FQ == 4) {
    *reinterpret_cast<uint2*>(dst) = make_uint2(v[0], v[1]);
  } else {
    *reinterpret_cast<uint4*>(dst) = make_uint4(v[0], v[1], v[2], v[3]);
  }
}

// One thread per element: filt[n][(r*S + s)*Cp + c] = w[n][c][r][s], zero for c >= C; folded (FQ > 0, rows of CH):
// filt[n][r*CH + s*FQ + c] = w[n][c][r][s], zero for c >= C and s*FQ + c >= S*FQ.
template <class T, int FQ = 0, int CH = 0>
__device__ __forceinline__ void igemm_wgmma_pack_16_body(const T* __restrict__ w, T* __restrict__ filt, int K, int C,
                                                         int R, int S, int Cp) {
  const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long KRp = FQ > 0 ? static_cast<long long>(R) * CH : static_cast<long long>(R) * S * Cp;
  if (idx >= K * KRp) return;
  const int n = static_cast<int>(idx / KRp), rest = static_cast<int>(idx % KRp);
  int r, s, c;
  if constexpr (FQ > 0) {
    r = rest / CH;
    s = (rest % CH) / FQ;
    c = (rest % CH) % FQ;
  } else {
    r = (rest / Cp) / S;
    s = (rest / Cp) % S;
    c = rest % Cp;
  }
  T v;
  v.bits = c < C && s < S ? w[((static_cast<long long>(n) * C + c) * R + r) * S + s].bits
                          : static_cast<unsigned short>(0);
  filt[idx] = v;
}

// A split problem's fp32 workspace -> y in T (one rounding); n elements, grid-stride.
template <class T>
__device__ __forceinline__ void igemm_wgmma_f32_to_16_body(const float* __restrict__ ws, T* __restrict__ y,
                                                           int n) {
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    y[i] = round_to<T>(ws[i]);
}

// Byte offset of 16-byte piece j of row r in a K-major tile of CHB-byte rows with the CHB-byte swizzle (CUTLASS's
// Swizzle<3,4,3> / <2,4,3> / <1,4,3>: the piece index XORed with address bits 7.. of the row's start).
template <int CHB>
__device__ __forceinline__ unsigned swizzled_piece(int r, int j) {
  if constexpr (CHB == 128) {
    return static_cast<unsigned>(r * 128 + ((j ^ (r & 7)) << 4));
  } else if constexpr (CHB == 64) {
    return static_cast<unsigned>(r * 64 + ((j ^ ((r >> 1) & 3)) << 4));
  } else {
    return static_cast<unsigned>(r * 32 + ((j ^ ((r >> 2) & 1)) << 4));
  }
}

// Byte offset of byte b (a multiple of the copy size, within one 16-byte piece) of row r: swizzled_piece's rule.
template <int CHB>
__device__ __forceinline__ unsigned swizzled_byte(int r, int b) {
  return swizzled_piece<CHB>(r, b >> 4) + static_cast<unsigned>(b & 15);
}

// cp.async of BYTES = 4, 8 or 16 bytes, zero-filled when !ok (16: the L2-only .cg path; 4, 8: .ca, the only one).
template <int BYTES>
__device__ __forceinline__ void cp_async_zfill(unsigned dst, const void* src, bool ok) {
  if constexpr (BYTES == 16) {
    cp_async16_zfill(dst, src, ok);
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(src), "n"(BYTES),
                 "r"(ok ? BYTES : 0));
  }
}

// Matrix descriptor of a K-major tile of CHB-byte swizzled rows at `addr` (aligned to the 8-row group), advanced by
// k-step `ks` (16 elements = 32 bytes): start >> 4, leading offset 16 B (unused by swizzled K-major layouts), stride
// offset 8*CHB bytes between 8-row groups, layout type 1 / 2 / 3 = 128 / 64 / 32-byte swizzle.
template <int CHB>
__device__ __forceinline__ unsigned long long swizzled_desc_16(unsigned addr, int ks) {
  constexpr unsigned long long layout = CHB == 128 ? 1ull : CHB == 64 ? 2ull : 3ull;
  const unsigned start = addr + ks * 32;
  return static_cast<unsigned long long>((start & 0x3FFFF) >> 4) | (1ull << 16) |
         (static_cast<unsigned long long>(CHB / 2) << 32) | (layout << 62);
}

// The multistage main loop of the 16-bit wgmma kernels (this one and its 1x1 sibling): the copies run STAGES - 2
// chunks ahead, the tensor cores are given chunk it before the copies of chunk it + STAGES - 2 are issued (the
// copies' address arithmetic stays off the MMA's critical path), one wgmma group stays in flight across chunks.
// load(stage, chunk) issues one chunk's copies into a stage; mma(stage) issues its wgmmas (between fence and commit).
template <int STAGES, class Load, class Mma>
__device__ __forceinline__ void wgmma_half_pipeline(int nchunks, int chunk0, Load&& load, Mma&& mma) {
  static_assert(STAGES >= 3, "one stage computing, one in flight in the tensor cores, one loading");
#pragma unroll
  for (int s = 0; s < STAGES - 2; ++s) {
    if (s < nchunks) load(s, chunk0 + s);
    cp_async_commit();
  }
  for (int it = 0; it < nchunks; ++it) {
    cp_async_wait<STAGES - 3>();
    fence_proxy_async();  // the copies' words, read next by the tensor cores (async proxy)
    __syncthreads();      // all copies of chunk it landed; every warpgroup retired chunk it - 2 (stage reuse)
    wgmma_fence();
    mma(it % STAGES);
    wgmma_commit();
    {   // the stage of chunk it - 2, retired by every warpgroup before the barrier above
      const int next = it + STAGES - 2;
      if (next < nchunks) load(next % STAGES, chunk0 + next);
      cp_async_commit();
    }
    wgmma_wait<1>();
  }
  wgmma_wait<0>();
}

template <class T, int BN, int MI, int WG, int STAGES, int CHB, int FQ = 0>
__device__ __forceinline__ void igemm_wgmma_half_fwd_body(const T* __restrict__ xt, const T* __restrict__ filt,
                                                           T* __restrict__ y, float* __restrict__ ysplit, int N,
                                                           int Cp, int H, int W, int K, int P, int Q, int S, int SH,
                                                           int SW, int PH, int PW, int DH, int DW, int KRp,
                                                           int chunks_per_split) {
  static_assert(CHB == 128 || CHB == 64 || CHB == 32, "rows of 128, 64 or 32 bytes");
  static_assert(FQ == 0 || FQ == 2 || FQ == 4 || FQ == 8, "folded taps: 2, 4 or 8 channels a pixel");
  constexpr int CH = CHB / 2;                  // elements per row: one chunk of one tap (folded: of one filter row)
  // threads per row: 16-byte pieces of the row, or (folded) tap slots, slot j copying taps j, j + 8, ... < S
  constexpr int ROW_PIECES = CHB / 16;         // 16-byte pieces of a row (the filters' copies)
  constexpr int PIECES = FQ > 0 ? 8 : ROW_PIECES;
  constexpr int THREADS = 128 * WG, BM = 64 * WG * MI;
  constexpr int ROWS_PER_PASS = THREADS / PIECES;
  constexpr int A_BYTES = BM * CHB, B_BYTES = BN * CHB, STAGE_BYTES = A_BYTES + B_BYTES;
  constexpr int A_ROWS = BM / ROWS_PER_PASS;                                  // per thread (BM is a multiple)
  constexpr int B_COPIES = (BN * ROW_PIECES + THREADS - 1) / THREADS;   // per thread, the last maybe partial
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned smem0 = (smem_u32(smem_raw) + 1023u) & ~1023u;

  const int tid = threadIdx.x, warp = tid >> 5;
  const int PQ = P * Q;
  const long long M = static_cast<long long>(N) * PQ;
  const long long m0 = static_cast<long long>(blockIdx.x) * BM;
  const int n0 = blockIdx.y * BN;
  const int cblocks = FQ > 0 ? 1 : Cp / CH;
  const int chunks_total = KRp / CH;
  const int chunk0 = blockIdx.z * chunks_per_split;
  const int nchunks = min(chunks_total - chunk0, chunks_per_split);

  // this thread copies 16-byte piece tid % PIECES (8 elements; folded: the taps of slot tid % PIECES) of rows
  // tid / PIECES + j * ROWS_PER_PASS
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
      pix_base[j] = static_cast<long long>(img) * H * W * Cp + (FQ > 0 ? 0 : piece * 8);
    }
  }

  auto load_stage = [&](int stage, int chunk) {
    const unsigned sA = smem0 + stage * STAGE_BYTES, sB = sA + A_BYTES;
    if constexpr (FQ > 0) {   // chunk = filter row r: each pixel's S taps, one copy of FQ channels each
      const int dh = chunk * DH;
#pragma unroll
      for (int j = 0; j < A_ROWS; ++j) {
        const int row = tid / PIECES + j * ROWS_PER_PASS;
        const int h = pix_h0[j] + dh;
        const bool h_ok = static_cast<unsigned>(h) < static_cast<unsigned>(H);
        for (int s = piece; s < S; s += PIECES) {
          const int w = pix_w0[j] + s * DW;
          const bool ok = h_ok && static_cast<unsigned>(w) < static_cast<unsigned>(W);
          const T* src = ok ? xt + pix_base[j] + (static_cast<long long>(h) * W + w) * FQ : xt;
          cp_async_zfill<2 * FQ>(sA + swizzled_byte<CHB>(row, s * 2 * FQ), src, ok);
        }
      }
    } else {
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
    }
    const int kbase = chunk * CH;
#pragma unroll
    for (int j = 0; j < B_COPIES; ++j) {
      const int idx = tid + j * THREADS;
      if ((BN * ROW_PIECES) % THREADS != 0 && idx >= BN * ROW_PIECES) break;
      const int row = idx / ROW_PIECES, c = idx % ROW_PIECES;
      const bool ok = n0 + row < K;
      const T* src = filt + static_cast<long long>(ok ? n0 + row : 0) * KRp + kbase + c * 8;
      cp_async16_zfill(sB + swizzled_piece<CHB>(row, c), src, ok);
    }
  };

  float acc[MI][BN / 2];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int j = 0; j < BN / 2; ++j) acc[mi][j] = 0.0f;

  if constexpr (FQ > 0) {   // the columns past S*FQ are never copied: zero in every stage, once
    for (int i = tid; i < STAGES * BM * CHB / 16; i += THREADS) {
      const int stage = i / (BM * CHB / 16), rest = i - stage * (BM * CHB / 16);
      asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(smem0 + stage * STAGE_BYTES + rest * 16),
                   "r"(0) : "memory");
    }
    __syncthreads();   // every zero stored before any thread's copies land on the same rows
  }
  const int wg = warp >> 2;
  wgmma_half_pipeline<STAGES>(nchunks, chunk0, load_stage, [&](int stage) {
    const unsigned sA = smem0 + stage * STAGE_BYTES + wg * (BM / WG) * CHB, sB = smem0 + stage * STAGE_BYTES + A_BYTES;
#pragma unroll
    for (int ks = 0; ks < CHB / 32; ++ks)   // k16 steps of 32 bytes across the row
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
        WgmmaSS<T, BN>::run(acc[mi], swizzled_desc_16<CHB>(sA + mi * 64 * CHB, ks), swizzled_desc_16<CHB>(sB, ks));
  });

  const int lane = tid & 31, wq = warp & 3, g = lane >> 2, t = lane & 3;
  // This thread's fragments with m < M and col < K straight to global memory: fp32 atomics into the split's
  // workspace, or y rounded to T (a plain lambda: NVRTC takes no generic one in device code)
  auto store_fragments = [&](bool atomics) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
      for (int e2 = 0; e2 < 2; ++e2) {
        const long long m = m0 + wg * (BM / WG) + mi * 64 + wq * 16 + g + 8 * e2;
        if (m >= M) continue;
        const long long img = m / PQ;
        const long long row = img * K * PQ + (m - img * PQ);
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
    }
  };
  if (gridDim.z > 1) {   // split reduction: fp32 atomics into the workspace, converted by another kernel
    store_fragments(true);
    return;
  }
  // The tile through shared memory, [BN channels][BM + 8 pixels] in T, then channel by channel: consecutive threads
  // store consecutive pixel pairs of one channel (NCHW rows), 4 bytes where P*Q is even (a pair then never straddles
  // an image), 2 bytes otherwise; full 32-byte sectors instead of the fragments' 16-byte runs of 8 pixels.
  constexpr int LD = BM + 8;    // 8 elements of padding: the fragment writes of a warp's four columns hit 4 banks
  if constexpr (BN * LD * 2 + BM * 8 > STAGES * STAGE_BYTES) {   // small stages (16-channel chunks): direct stores
    store_fragments(false);
    return;
  }
  cp_async_wait<0>();
  __syncthreads();              // every warpgroup's MMAs retired (wait_group 0 above), no copy in flight
  unsigned char* staged = smem_raw + (smem0 - smem_u32(smem_raw));
  unsigned short* tile = reinterpret_cast<unsigned short*>(staged);
  long long* pix = reinterpret_cast<long long*>(staged + BN * LD * 2);   // y offset of each pixel's channel 0
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
  for (int i = tid; i < BM; i += THREADS) {   // one division per pixel of the tile, not one per store
    const long long m = m0 + i;
    const long long img = m / PQ;
    pix[i] = m < M ? img * K * PQ + (m - img * PQ) : 0;
  }
  __syncthreads();
  const bool even = (PQ & 1) == 0;
  unsigned short* yb = reinterpret_cast<unsigned short*>(y);
  for (int idx = tid; idx < BN * (BM / 2); idx += THREADS) {
    const int cl = idx / (BM / 2), pr = idx - cl * (BM / 2);
    const int col = n0 + cl;
    const long long m = m0 + 2 * pr;
    if (col >= K || m >= M) continue;
    const unsigned short* src = tile + cl * LD + 2 * pr;
    const long long at = pix[2 * pr] + static_cast<long long>(col) * PQ;
    if (even) {   // m even and P*Q even: m + 1 is a pixel of the same image (M is even), the pair 4-byte aligned
      *reinterpret_cast<unsigned*>(yb + at) = static_cast<unsigned>(src[0]) | (static_cast<unsigned>(src[1]) << 16);
    } else {
      yb[at] = src[0];
      if (m + 1 < M) yb[pix[2 * pr + 1] + static_cast<long long>(col) * PQ] = src[1];
    }
  }
}

}  // namespace convtune
