// Implicit-GEMM convolution forward on tensor cores: TF32 products, fp32 accumulation, fp32 NCHW in and out.
//
//   y[n,k,p,q] = sum_{c,r,s} x[n, c, p*SH - PH + r*DH, q*SW - PW + s*DW] * w[k, c, r, s]   (zero outside x)
//
// The GEMM: M = N*P*Q output pixels (m = n*P*Q + p*Q + q, all images), N_gemm = K output channels, the reduction
// index kr = c*R*S + r*S + s over KR = C*R*S. A[m][kr] is gathered from x on the fly (nothing is materialised);
// B[kr][k] comes from the filter operand `filt` that igemm_pack writes once per weight tensor:
//   * B in mma-fragment order, rounded to TF32: 8 x 8 tiles (kb, nb) over KRp x Kp8 (KRp = KR rounded up to 64,
//     Kp8 = K rounded up to 8, zero outside), tile (kb, nb) at float ((kb * NB8 + nb) * 64), element
//     B(kb*8 + t + 4j, nb*8 + g) at ((t*8 + g) * 2 + j) within it: lane (g, t) of an mma reads its b0, b1 as one
//     8-byte word, the 32 lanes one contiguous 256 bytes;
//   * after it (float KRp * Kp8), the gather table: one int4 per kr < KRp, {c*H*W + r*DH*W + s*DW, r*DH, s*DW, 0};
//     rows kr >= KR hold dh = -2^29, so their taps fail the bounds test and read nothing.
// With the table a gather costs one broadcast 16-byte load per row (every thread of a warp copies the same kr) and
// two adds and two compares per element, instead of dividing kr by R*S and by S.
//
// A block owns BM pixels x BN channels and walks its slice of the reduction in chunks of BK (a divisor of 64),
// staged in shared memory by cp.async STAGES deep (the multistage pipeline of CUTLASS's sm80 kernels):
//   As: A in fragment order, 16 x 8 (pixels x kr) tiles (kb, mt), tile at ((kb * BM/16 + mt) * 128), element
//       A(mt*16 + g + 8*mh, kb*8 + t + 4*kh) at ((t*8 + g) * 4 + 2*kh + mh): lane (g, t) reads a0..a3 as one
//       16-byte word, the warp one contiguous 512 bytes (conflict-free); each 4-byte copy lands at its slot;
//   Bs: the filter tiles of the chunk, copied 16 bytes at a time in their global order (BK * BN floats).
// WM x WN warps; a warp owns a (BM/WM) x (BN/WN) tile of mma.sync.m16n8k8 TF32 tiles (MI x NI of them), with the
// fragment layouts of the PTX ISA (A row-major 16x8: a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4); B
// column-major 8x8: b0 (t, g), b1 (t+4, g); C 16x8: c0,c1 (g, 2t..2t+1), c2,c3 (g+8, 2t..2t+1)). A is rounded to
// TF32 (cvt.rna, as cuBLAS and cuDNN round) when read from shared memory; B was rounded when packed.
//
// Each thread copies a fixed pixel column of As (its m, hence n, p, q, fixed for the whole block) and BK*BM/THREADS
// rows of it per chunk. Padding taps and the ragged edges (m >= M, kr >= KR, k >= Kp8) are zero-filled copies that
// read nothing (cp.async src-size 0). With gridDim.z > 1 the reduction is split across blocks and each adds its tile
// into y with atomics (y zeroed first): small maps with many channels have too few tiles to fill the GPU.
#include "storage.cuh"

namespace convtune {

__device__ __forceinline__ unsigned to_tf32(float v) {
  unsigned out;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(out) : "f"(v));
  return out;
}

__device__ __forceinline__ void mma_tf32_16x8x8(float* d, const unsigned* a, const unsigned* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// The 16-bit variants' product: mma.sync.m16n8k16 with fp32 accumulation. Its fragments are 32-bit words of two
// consecutive-k elements (lower half the lower k): A a0 (g, 2t..2t+1), a1 (g+8, ..), a2 (g, 2t+8..), a3 (g+8, 2t+8..);
// B b0 (2t..2t+1, g), b1 (2t+8.., g). In words (w = k/2) that is the TF32 m16n8k8 fragment map exactly (a word at
// (g, t), (g+8, t), (g, t+4), (g+8, t+4); b at (t, g), (t+4, g)), so the NHWC kernel runs a 16-bit problem as the
// TF32 one over a reduction of words: C/2 words per pixel, one mma per 8 words (16 elements).
template <class T>
struct MmaOf;
template <>
struct MmaOf<float> {
  static __device__ __forceinline__ void run(float* d, const unsigned* a, const unsigned* b) {
    mma_tf32_16x8x8(d, a, b);
  }
};
template <>
struct MmaOf<bfloat16> {
  static __device__ __forceinline__ void run(float* d, const unsigned* a, const unsigned* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};
template <>
struct MmaOf<half16> {
  static __device__ __forceinline__ void run(float* d, const unsigned* a, const unsigned* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};

// Float offset of A(row kl of the chunk, column ml) in a fragment-ordered A stage of BM pixels. Additive in its
// two arguments' parts (row part + column part), so a thread's copies add compile-time row offsets to one base.
template <int BM>
__device__ __forceinline__ int a_row_offset(int kl) {
  return (kl >> 3) * (BM / 16) * 128 + (kl & 3) * 32 + ((kl >> 2) & 1) * 2;
}
__device__ __forceinline__ int a_col_offset(int ml) { return (ml >> 4) * 128 + (ml & 7) * 4 + ((ml >> 3) & 1); }

// The B stage of chunk kr0 (rows kr0 .. kr0 + BK of the packed filter tiles, channels n0 .. n0 + BN): 16-byte copies
// in their global order; channel tiles at or past Kp8 are zero-filled and read nothing.
template <int BN, int BK, int THREADS>
__device__ __forceinline__ void load_b_stage(float* Bs, const float* __restrict__ filt, int kr0, int n0, int NB8,
                                             int tid) {
  constexpr int B_SEGS = BK * BN / 4;
  constexpr int NB = (B_SEGS + THREADS - 1) / THREADS;
  const int kb0 = kr0 / 8, nb0 = n0 / 8;
#pragma unroll
  for (int i = 0; i < NB; ++i) {
    const int e = tid + i * THREADS;
    if (B_SEGS % THREADS == 0 || e < B_SEGS) {
      const int tile = e >> 4, within = e & 15;
      const int lk = tile / (BN / 8), ln = tile - lk * (BN / 8);
      const bool ok = nb0 + ln < NB8;
      const float* src = ok ? filt + (static_cast<long long>(kb0 + lk) * NB8 + nb0 + ln) * 64 + within * 4 : filt;
      cp_async16(Bs + e * 4, src, ok);
    }
  }
}

template <class T>
struct is_f32 {
  static constexpr bool value = false;
};
template <>
struct is_f32<float> {
  static constexpr bool value = true;
};

// Epilogue of a warp's MI x NI mma tiles at pixel wm (over all images) and channel wn: c0,c1 at (row g, cols 2t,
// 2t+1), c2,c3 at row g + 8; y[n][k][pq], 8 consecutive pixels per store; atomic adds for a split reduction (fp32
// y only: a split 16-bit problem adds into an fp32 workspace that igemm_f32_to_* converts). 16-bit y: rounded once.
template <int MI, int NI, class T = float>
__device__ __forceinline__ void store_tile(const float (&acc)[MI][NI][4], T* __restrict__ y, int wm, int wn,
                                           int M, int K, int PQ, int g, int t4, bool atomic) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int m = wm + mi * 16 + g + half * 8;
      if (m >= M) continue;
      const int n = m / PQ, pq = m - n * PQ;
      T* yrow = y + static_cast<long long>(n) * K * PQ + pq;
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
#pragma unroll
        for (int v = 0; v < 2; ++v) {
          const int k = wn + ni * 8 + 2 * t4 + v;
          if (k < K) {
            const float val = acc[mi][ni][half * 2 + v];
            if constexpr (is_f32<T>::value) {
              if (atomic)
                atomicAdd(yrow + static_cast<long long>(k) * PQ, val);
              else
                yrow[static_cast<long long>(k) * PQ] = val;
            } else {
              yrow[static_cast<long long>(k) * PQ] = from_f32<T>(val);
            }
          }
        }
      }
    }
  }
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES>
__device__ __forceinline__ void igemm_fwd_body(const float* __restrict__ x, const float* __restrict__ filt,
                                               float* __restrict__ y, int N, int C, int H, int W, int K, int P,
                                               int Q, int SH, int SW, int PH, int PW, int KR, int KRp,
                                               int NB8, int chunks_per_split) {
  constexpr int THREADS = WM * WN * 32;
  constexpr int WTM = BM / WM, WTN = BN / WN;      // warp tile
  constexpr int MI = WTM / 16, NI = WTN / 8;       // mma tiles per warp
  constexpr int A_STAGE = BK * BM, B_STAGE = BK * BN, STAGE = A_STAGE + B_STAGE;
  constexpr int A_COPIES = BK * BM / THREADS;      // 4-byte A-tile copies per thread and chunk
  constexpr int MPT = BM > THREADS ? BM / THREADS : 1;  // pixel columns one thread copies
  static_assert(BM % 32 == 0 && BN % 32 == 0, "tiles: multiples of 32");
  static_assert(WTM % 16 == 0 && WTN % 8 == 0, "warp tile: multiples of the 16 x 8 mma tile");
  static_assert(BK % 8 == 0 && 64 % BK == 0, "chunk: a multiple of the mma's k = 8 dividing 64 (KRp)");
  static_assert(THREADS % BM == 0 || BM % THREADS == 0, "pixel columns map onto threads");
  static_assert(A_COPIES >= 1 && (BK * BM) % THREADS == 0, "every thread copies whole A rows");
  static_assert(STAGES >= 2 && STAGES <= 5, "2..5 pipeline stages");
  extern __shared__ __align__(16) float smem[];

  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int slot = t4 * 8 + g;                     // the lane's word in a fragment-ordered tile
  const int wm0 = (warp % WM) * WTM, wn0 = (warp / WM) * WTN;
  const int PQ = P * Q, HW = H * W;
  const int M = N * PQ;
  const int m0 = blockIdx.x * BM;
  const int n0 = blockIdx.y * BN;
  const int4* __restrict__ table = reinterpret_cast<const int4*>(filt + static_cast<long long>(KRp) * NB8 * 8);

  // This thread's pixel column(s) of As: input row/col origin and the float of x at (n, 0, origin), fixed for the
  // block; a tap (c, r, s) of the column reads x[base + table[kr].x] when origin + (dh, dw) lies inside the map.
  constexpr int COL_STEP = THREADS >= BM ? 0 : THREADS;
  constexpr int ROW_STEP = THREADS >= BM ? THREADS / BM : 1;
  const int a_col0 = THREADS >= BM ? tid % BM : tid;
  const int a_row0 = THREADS >= BM ? tid / BM : 0;
  int a_hb[MPT], a_wb[MPT], a_base[MPT];
#pragma unroll
  for (int j = 0; j < MPT; ++j) {
    const int m = m0 + a_col0 + j * COL_STEP;
    if (m < M) {
      const int n = m / PQ, pq = m - n * PQ;
      const int p = pq / Q, q = pq - p * Q;
      a_hb[j] = p * SH - PH;
      a_wb[j] = q * SW - PW;
      a_base[j] = n * C * HW + a_hb[j] * W + a_wb[j];
    } else {  // past the last pixel: every tap reads as padding
      a_hb[j] = -(1 << 29);
      a_wb[j] = 0;
      a_base[j] = 0;
    }
  }
  const int a_dst0 = a_row_offset<BM>(a_row0) + a_col_offset(a_col0);

  const int chunk0 = blockIdx.z * chunks_per_split;
  const int nchunks = min((KR + BK - 1) / BK - chunk0, chunks_per_split);
  if (nchunks <= 0) return;

  auto load_stage = [&](int stage_slot, int chunk) {
    float* As = smem + stage_slot * STAGE;
    float* Bs = As + A_STAGE;
    const int kr0 = (chunk0 + chunk) * BK;
#pragma unroll
    for (int i = 0; i < A_COPIES; ++i) {
      const int j = THREADS >= BM ? 0 : i % MPT;            // which pixel column
      const int drow = (THREADS >= BM ? i : i / MPT) * ROW_STEP;
      const int4 tap = __ldg(table + kr0 + a_row0 + drow);
      const int h = a_hb[j] + tap.y;
      const int w = a_wb[j] + tap.z;
      const bool ok = static_cast<unsigned>(h) < static_cast<unsigned>(H) &&
                      static_cast<unsigned>(w) < static_cast<unsigned>(W);
      const float* src = ok ? x + (a_base[j] + tap.x) : x;
      cp_async4(As + a_dst0 + a_row_offset<BM>(drow) + j * (COL_STEP / 16) * 128, src, ok);
    }
    load_b_stage<BN, BK, THREADS>(Bs, filt, kr0, n0, NB8, tid);
  };

  float acc[MI][NI][4];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int v = 0; v < 4; ++v) acc[mi][ni][v] = 0.0f;

#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < nchunks) load_stage(st, st);
    cp_async_commit();
  }
  for (int it = 0; it < nchunks; ++it) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();  // chunk `it` landed for every thread; everyone is done with the slot refilled below
    const int next = it + STAGES - 1;
    if (next < nchunks) load_stage(next % STAGES, next);
    cp_async_commit();
    const float* As = smem + (it % STAGES) * STAGE;
    const float* Bs = As + A_STAGE;
#pragma unroll
    for (int kb = 0; kb < BK / 8; ++kb) {
      unsigned a[MI][4], b[NI][2];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        const float4 v = *reinterpret_cast<const float4*>(As + ((kb * (BM / 16) + wm0 / 16 + mi) * 32 + slot) * 4);
        a[mi][0] = to_tf32(v.x);
        a[mi][1] = to_tf32(v.y);
        a[mi][2] = to_tf32(v.z);
        a[mi][3] = to_tf32(v.w);
      }
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const float2 v = *reinterpret_cast<const float2*>(Bs + ((kb * (BN / 8) + wn0 / 8 + ni) * 32 + slot) * 2);
        b[ni][0] = __float_as_uint(v.x);
        b[ni][1] = __float_as_uint(v.y);
      }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) mma_tf32_16x8x8(acc[mi][ni], a[mi], b[ni]);
    }
  }
  cp_async_wait<0>();

  store_tile<MI, NI>(acc, y, m0 + wm0, n0 + wn0, M, K, PQ, g, t4, gridDim.z > 1);
}

// ldmatrix.x4 of four 8 x 16-byte matrices: lanes 8j..8j+7 give the row addresses of matrix j; lane l receives
// word l % 4 of row l / 4 of each (so a TF32 A fragment from k-contiguous rows in one instruction).
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const float* row) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// The multistage main loop (CUTLASS's sm80 shape), over `nchunks` chunks of KB k8 steps in STAGES shared-memory
// slots of STAGE floats. load_stage(slot, chunk) issues one chunk's cp.async copies; load_frags(stage, kb, a, b)
// reads one k8 step's fragments from a slot. PIPELINE with KB even: the fragments are double-buffered in registers
// (step kb + 1's are read while step kb's mma issue) and the barrier that makes chunk it + 1 visible sits in chunk
// it's last step, so its wait overlaps that step's mma. Otherwise (the plain loop) each step reads, then multiplies:
// fewer registers, so the plan takes it where that lets more blocks reside (launcher.derive_plan).
// Slot reuse: chunk it + STAGES - 1 refills slot (it - 1) % STAGES at the top of iteration it; every read of that
// slot came before the barrier in iteration it - 1's last step.
template <int MI, int NI, int KB, int STAGES, int STAGE, bool PIPELINE, class Mma = MmaOf<float>, class LoadStage,
          class LoadFrags>
__device__ __forceinline__ void mainloop(float (&acc)[MI][NI][4], const float* smem, int nchunks,
                                         LoadStage&& load_stage, LoadFrags&& load_frags) {
#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < nchunks) load_stage(st, st);
    cp_async_commit();
  }
  if constexpr (PIPELINE && KB % 2 == 0) {
    unsigned a[2][MI][4], b[2][NI][2];
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    load_frags(smem, 0, a[0], b[0]);
    for (int it = 0; it < nchunks; ++it) {
      const float* cur = smem + (it % STAGES) * STAGE;
      const int next = it + STAGES - 1;
      if (next < nchunks) load_stage(next % STAGES, next);
      cp_async_commit();
#pragma unroll
      for (int kb = 0; kb < KB; ++kb) {
        if (kb == KB - 1) {
          cp_async_wait<STAGES - 2>();   // chunk it + 1 landed (STAGES - 2 newer groups may be in flight)
          __syncthreads();
          if (it + 1 < nchunks) load_frags(smem + ((it + 1) % STAGES) * STAGE, 0, a[0], b[0]);
        } else {
          load_frags(cur, kb + 1, a[(kb + 1) & 1], b[(kb + 1) & 1]);
        }
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) Mma::run(acc[mi][ni], a[kb & 1][mi], b[kb & 1][ni]);
      }
    }
  } else {
    for (int it = 0; it < nchunks; ++it) {
      cp_async_wait<STAGES - 2>();
      __syncthreads();  // chunk `it` landed for every thread; everyone is done with the slot refilled below
      const int next = it + STAGES - 1;
      if (next < nchunks) load_stage(next % STAGES, next);
      cp_async_commit();
      const float* cur = smem + (it % STAGES) * STAGE;
#pragma unroll
      for (int kb = 0; kb < KB; ++kb) {
        unsigned a[MI][4], b[NI][2];
        load_frags(cur, kb, a, b);
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) Mma::run(acc[mi][ni], a[mi], b[ni]);
      }
    }
  }
  cp_async_wait<0>();
}

// B fragments of one k8 step from a fragment-ordered B stage: one 8-byte read per 8-channel tile (pre-rounded).
template <int BN, int NI>
__device__ __forceinline__ void load_b_frags(unsigned (&b)[NI][2], const float* Bs, int kb, int wn0, int slot) {
#pragma unroll
  for (int ni = 0; ni < NI; ++ni) {
    const float2 v = *reinterpret_cast<const float2*>(Bs + ((kb * (BN / 8) + wn0 / 8 + ni) * 32 + slot) * 2);
    b[ni][0] = __float_as_uint(v.x);
    b[ni][1] = __float_as_uint(v.y);
  }
}

// The channels-last variant: xh is x in NHWC, already TF32-rounded (the prepared launch transposes an NCHW input into
// its workspace first, igemm_to_nhwc), the reduction runs kr = (r*S + s)*C + c (channels fastest; the pack writes
// B and the table in that order, the table entry {(r*DH*W + s*DW)*C + c, r*DH, s*DW, 0}), and C is a multiple of 4,
// so 4 consecutive kr are 4
// consecutive channels of one tap: A moves in 16-byte cp.async.cg copies (past L1, which the 4-byte gathers of
// the NCHW kernel saturate). As holds A k-contiguous: pixel row ml of BK floats, its 16-byte piece j at position
// j ^ swz(ml), swz(ml) = (ml / max(1, 32/BK)) mod min(BK/4, 8), so a warp's copies and its fragment reads (a0..a3
// of lane (g, t): rows g, g + 8, columns t, t + 4) are conflict-free. Thread tid copies piece tid mod (BK/4) of
// pixel rows tid / (BK/4) + i * THREADS/(BK/4): one table read per thread and chunk serves all its copies.
template <int BK>
__device__ __forceinline__ int nhwc_swizzle(int ml) {
  constexpr int ROWS_PER_LINE = 32 / BK > 1 ? 32 / BK : 1;
  constexpr int PIECES = BK / 4 < 8 ? BK / 4 : 8;
  return (ml / ROWS_PER_LINE) & (PIECES - 1);
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool PIPE, class T = float>
__device__ __forceinline__ void igemm_nhwc_body(const float* __restrict__ xh, const float* __restrict__ filt,
                                                float* __restrict__ y, int N, int C, int H, int W, int K, int P,
                                                int Q, int SH, int SW, int PH, int PW, int KR, int KRp, int NB8,
                                                int chunks_per_split) {
  constexpr int THREADS = WM * WN * 32;
  constexpr int WTM = BM / WM, WTN = BN / WN;
  constexpr int MI = WTM / 16, NI = WTN / 8;
  constexpr int A_STAGE = BK * BM, B_STAGE = BK * BN, STAGE = A_STAGE + B_STAGE;
  constexpr int PIECES = BK / 4;                   // 16-byte pieces of one pixel's chunk row
  constexpr int A_COPIES = BM * PIECES / THREADS;  // 16-byte A copies per thread and chunk
  constexpr int PIX_STEP = THREADS / PIECES;       // pixel rows between one thread's copies
  static_assert(BM % 32 == 0 && BN % 32 == 0, "tiles: multiples of 32");
  static_assert(WTM % 16 == 0 && WTN % 8 == 0, "warp tile: multiples of the 16 x 8 mma tile");
  static_assert(BK % 8 == 0 && 64 % BK == 0, "chunk: a multiple of the mma's k = 8 dividing 64 (KRp)");
  static_assert(A_COPIES >= 1 && (BM * PIECES) % THREADS == 0, "every thread copies whole 16-byte pieces");
  static_assert(STAGES >= 2 && STAGES <= 5, "2..5 pipeline stages");
  extern __shared__ __align__(16) float smem[];

  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int slot = t4 * 8 + g;
  const int wm0 = (warp % WM) * WTM, wn0 = (warp / WM) * WTN;
  const int PQ = P * Q;
  const int M = N * PQ;
  const int m0 = blockIdx.x * BM;
  const int n0 = blockIdx.y * BN;
  const int4* __restrict__ table = reinterpret_cast<const int4*>(filt + static_cast<long long>(KRp) * NB8 * 8);

  const int piece = tid % PIECES, pix0 = tid / PIECES;
  int a_hb[A_COPIES], a_wb[A_COPIES], a_base[A_COPIES], a_dst[A_COPIES];
#pragma unroll
  for (int i = 0; i < A_COPIES; ++i) {
    const int ml = pix0 + i * PIX_STEP;
    const int m = m0 + ml;
    a_dst[i] = ml * BK + ((piece ^ nhwc_swizzle<BK>(ml)) << 2);
    if (m < M) {
      const int n = m / PQ, pq = m - n * PQ;
      const int p = pq / Q, q = pq - p * Q;
      a_hb[i] = p * SH - PH;
      a_wb[i] = q * SW - PW;
      a_base[i] = ((n * H + a_hb[i]) * W + a_wb[i]) * C;
    } else {
      a_hb[i] = -(1 << 29);
      a_wb[i] = 0;
      a_base[i] = 0;
    }
  }

  const int chunk0 = blockIdx.z * chunks_per_split;
  const int nchunks = min((KR + BK - 1) / BK - chunk0, chunks_per_split);
  if (nchunks <= 0) return;

  auto load_stage = [&](int stage_slot, int chunk) {
    float* As = smem + stage_slot * STAGE;
    float* Bs = As + A_STAGE;
    const int kr0 = (chunk0 + chunk) * BK;
    const int4 tap = __ldg(table + kr0 + piece * 4);
#pragma unroll
    for (int i = 0; i < A_COPIES; ++i) {
      const int h = a_hb[i] + tap.y;
      const int w = a_wb[i] + tap.z;
      const bool ok = static_cast<unsigned>(h) < static_cast<unsigned>(H) &&
                      static_cast<unsigned>(w) < static_cast<unsigned>(W);
      cp_async16(As + a_dst[i], ok ? xh + (a_base[i] + tap.x) : xh, ok);
    }
    load_b_stage<BN, BK, THREADS>(Bs, filt, kr0, n0, NB8, tid);
  };

  float acc[MI][NI][4];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int v = 0; v < 4; ++v) acc[mi][ni][v] = 0.0f;

  // ldmatrix rows: lane l addresses row (l mod 8) + 8 * (l / 8 mod 2) of the 16-row tile, piece 2kb + l / 16;
  // rows r and r + 8 share the swizzle (see nhwc_swizzle), so it is the swizzle of l mod 8.
  const int lrow = (lane & 7) + 8 * ((lane >> 3) & 1), lhalf = lane >> 4, lswz = nhwc_swizzle<BK>(lane & 7);
  auto load_frags = [&](const float* stage, int kb, unsigned (&a)[MI][4], unsigned (&b)[NI][2]) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      ldmatrix_x4(a[mi], stage + (wm0 + mi * 16 + lrow) * BK + (((2 * kb + lhalf) ^ lswz) << 2));
    }
    load_b_frags<BN, NI>(b, stage + A_STAGE, kb, wn0, slot);
  };
  mainloop<MI, NI, BK / 8, STAGES, STAGE, PIPE, MmaOf<T>>(acc, smem, nchunks, load_stage, load_frags);

  if (is_f32<T>::value || gridDim.z > 1)   // fp32 y, or a split 16-bit problem's fp32 workspace
    store_tile<MI, NI>(acc, y, m0 + wm0, n0 + wn0, M, K, PQ, g, t4, gridDim.z > 1);
  else
    store_tile<MI, NI, T>(acc, reinterpret_cast<T*>(y), m0 + wm0, n0 + wn0, M, K, PQ, g, t4, false);
}

// The 1x1 variant (R = S = 1, stride 1, no padding, H*W a multiple of 4): A[m][c] = x[n, c, pq] is contiguous along
// the pixels, so A moves in 16-byte copies of 4 pixels straight from NCHW x (no gather table, no layout change).
// As[BK][BM + 8] holds it pixels-contiguous (the +8 pad makes the fragment reads conflict-free: lane (g, t) reads
// row t (or t + 4), column g (or g + 8), bank (8t + g) mod 32); thread tid copies pixel group tid mod (BM/4) (4
// pixels, one image: H*W is a multiple of 4) of channel rows tid / (BM/4) + i * THREADS/(BM/4).
template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool PIPE>
__device__ __forceinline__ void igemm_1x1_body(const float* __restrict__ x, const float* __restrict__ filt,
                                               float* __restrict__ y, int N, int C, int H, int W, int K, int P,
                                               int Q, int SH, int SW, int PH, int PW, int KR, int KRp, int NB8,
                                               int chunks_per_split) {
  constexpr int THREADS = WM * WN * 32;
  constexpr int WTM = BM / WM, WTN = BN / WN;
  constexpr int MI = WTM / 16, NI = WTN / 8;
  constexpr int LDA = BM + 8;
  constexpr int A_STAGE = BK * LDA, B_STAGE = BK * BN, STAGE = A_STAGE + B_STAGE;
  constexpr int GROUPS = BM / 4;                   // 4-pixel groups of a channel row
  constexpr int A_COPIES = BK * GROUPS / THREADS;  // 16-byte A copies per thread and chunk
  constexpr int ROW_STEP = THREADS / GROUPS;       // channel rows between one thread's copies
  static_assert(BM % 32 == 0 && BN % 32 == 0, "tiles: multiples of 32");
  static_assert(WTM % 16 == 0 && WTN % 8 == 0, "warp tile: multiples of the 16 x 8 mma tile");
  static_assert(BK % 8 == 0 && 64 % BK == 0, "chunk: a multiple of the mma's k = 8 dividing 64 (KRp)");
  static_assert(THREADS % GROUPS == 0 && A_COPIES >= 1 && (BK * GROUPS) % THREADS == 0,
                "every thread copies whole 16-byte groups of one pixel column");
  static_assert(STAGES >= 2 && STAGES <= 5, "2..5 pipeline stages");
  extern __shared__ __align__(16) float smem[];

  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int slot = t4 * 8 + g;
  const int wm0 = (warp % WM) * WTM, wn0 = (warp / WM) * WTN;
  const int HW = H * W;
  const int M = N * HW;
  const int m0 = blockIdx.x * BM;
  const int n0 = blockIdx.y * BN;

  const int group = tid % GROUPS, row0 = tid / GROUPS;
  const int m = m0 + 4 * group;
  const bool m_ok = m < M;                          // all 4 pixels or none: M and m are multiples of 4
  const int img = m_ok ? m / HW : 0;
  const long long a_base = m_ok ? static_cast<long long>(img) * C * HW + (m - img * HW) : 0;
  const int a_dst0 = row0 * LDA + 4 * group;

  const int chunk0 = blockIdx.z * chunks_per_split;
  const int nchunks = min((KR + BK - 1) / BK - chunk0, chunks_per_split);
  if (nchunks <= 0) return;

  auto load_stage = [&](int stage_slot, int chunk) {
    float* As = smem + stage_slot * STAGE;
    float* Bs = As + A_STAGE;
    const int kr0 = (chunk0 + chunk) * BK;
#pragma unroll
    for (int i = 0; i < A_COPIES; ++i) {
      const int c = kr0 + row0 + i * ROW_STEP;
      const bool ok = m_ok && c < C;
      cp_async16(As + a_dst0 + i * ROW_STEP * LDA, ok ? x + a_base + static_cast<long long>(c) * HW : x, ok);
    }
    load_b_stage<BN, BK, THREADS>(Bs, filt, kr0, n0, NB8, tid);
  };

  float acc[MI][NI][4];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int v = 0; v < 4; ++v) acc[mi][ni][v] = 0.0f;

  auto load_frags = [&](const float* stage, int kb, unsigned (&a)[MI][4], unsigned (&b)[NI][2]) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const float* ap = stage + (kb * 8 + t4) * LDA + wm0 + mi * 16 + g;
      a[mi][0] = to_tf32(ap[0]);
      a[mi][1] = to_tf32(ap[8]);
      a[mi][2] = to_tf32(ap[4 * LDA]);
      a[mi][3] = to_tf32(ap[4 * LDA + 8]);
    }
    load_b_frags<BN, NI>(b, stage + A_STAGE, kb, wn0, slot);
  };
  mainloop<MI, NI, BK / 8, STAGES, STAGE, PIPE>(acc, smem, nchunks, load_stage, load_frags);

  store_tile<MI, NI>(acc, y, m0 + wm0, n0 + wn0, M, K, HW, g, t4, gridDim.z > 1);
}

}  // namespace convtune

// NCHW -> NHWC of x (N, C, H*W): 32 x 32 tiles of (channels, pixels) through shared memory, both sides coalesced.
// Grid (ceil(HW/32), ceil(C/32), N), block (32, 8). fp32 x is rounded to TF32 as it is written (so the NHWC main
// loop feeds ldmatrix's words to the mma as they are: a cvt per fragment element cost up to 20% at 64 x 64 warp
// tiles, H200); 16-bit x (bfloat16 or float16 bits) is moved as it is.
namespace convtune {
template <class T, bool ROUND>
__device__ __forceinline__ void to_nhwc(const T* __restrict__ x, T* __restrict__ xh, int C, int HW) {
  __shared__ T tile[32][33];
  const long long image = static_cast<long long>(blockIdx.z) * C * HW;
  const int p0 = blockIdx.x * 32, c0 = blockIdx.y * 32;
#pragma unroll
  for (int j = threadIdx.y; j < 32; j += 8) {
    const int c = c0 + j, p = p0 + threadIdx.x;
    if (c < C && p < HW) tile[j][threadIdx.x] = x[image + static_cast<long long>(c) * HW + p];
  }
  __syncthreads();
#pragma unroll
  for (int j = threadIdx.y; j < 32; j += 8) {
    const int p = p0 + j, c = c0 + threadIdx.x;
    T v = tile[threadIdx.x][j];
    if constexpr (ROUND) v = __uint_as_float(to_tf32(v));
    if (c < C && p < HW) xh[image + static_cast<long long>(p) * C + c] = v;
  }
}
}  // namespace convtune

extern "C" __global__ void igemm_to_nhwc(const float* __restrict__ x, float* __restrict__ xh, int C, int HW) {
  convtune::to_nhwc<float, true>(x, xh, C, HW);
}

extern "C" __global__ void igemm_to_nhwc_16(const unsigned short* __restrict__ x, unsigned short* __restrict__ xh,
                                            int C, int HW) {
  convtune::to_nhwc<unsigned short, false>(x, xh, C, HW);
}

// A split 16-bit problem's fp32 workspace -> y in its storage type (one rounding); n elements, grid-stride.
template <class T>
__device__ __forceinline__ void f32_to(const float* __restrict__ ws, T* __restrict__ y, int n) {
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    y[i] = convtune::from_f32<T>(ws[i]);
}

extern "C" __global__ void igemm_f32_to_bf16(const float* __restrict__ ws, convtune::bfloat16* __restrict__ y,
                                             int n) {
  f32_to(ws, y, n);
}

extern "C" __global__ void igemm_f32_to_f16(const float* __restrict__ ws, convtune::half16* __restrict__ y,
                                            int n) {
  f32_to(ws, y, n);
}

// The filter operand from w (K, C, R, S): TF32-rounded B tiles in fragment order, then the gather table (layouts
// above), over the reduction order of the kernel: channels_last = 0 kr = c*R*S + r*S + s (NCHW input),
// 1 kr = (r*S + s)*C + c (NHWC). One thread per output word; KRp * Kp8 + 4 * KRp words in all.
extern "C" __global__ void igemm_pack(const float* __restrict__ w, float* __restrict__ filt, int K, int KR, int KRp,
                                      int NB8, int RS, int S, int HW, int W, int DH, int DW, int C,
                                      int channels_last) {
  const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long weights = static_cast<long long>(KRp) * NB8 * 8;   // (KRp/8) x NB8 tiles of 64
  if (idx < weights) {
    const int j = static_cast<int>(idx & 1), slot = static_cast<int>((idx >> 1) & 31);
    const long long tile = idx >> 6;
    const int nb = static_cast<int>(tile % NB8), kb = static_cast<int>(tile / NB8);
    const int kr = kb * 8 + (slot >> 3) + 4 * j, k = nb * 8 + (slot & 7);
    // the (c, r, s) element of w at reduction index kr: kr itself in NCHW order
    const int crs = channels_last ? (kr % C) * RS + kr / C : kr;
    const float v = (kr < KR && k < K) ? w[static_cast<long long>(k) * KR + crs] : 0.0f;
    filt[idx] = __uint_as_float(convtune::to_tf32(v));
  } else if (idx < weights + 4LL * KRp && (idx - weights) % 4 == 0) {
    const int kr = static_cast<int>((idx - weights) / 4);
    int4 e = make_int4(0, -(1 << 29), 0, 0);
    if (kr < KR) {
      const int c = channels_last ? kr % C : kr / RS, rs = channels_last ? kr / C : kr - c * RS;
      const int r = rs / S, s = rs - r * S;
      const int off = channels_last ? (r * DH * W + s * DW) * C + c : c * HW + r * DH * W + s * DW;
      e = make_int4(off, r * DH, s * DW, 0);
    }
    reinterpret_cast<int4*>(filt + weights)[kr] = e;
  }
}

// The 16-bit filter operand from w (K, C, R, S) bits (bfloat16 or float16; C even): the NHWC layout above over
// reduction words, word kw = elements kr = 2kw, 2kw + 1 of the (r, s, c) order (one tap, channels c, c + 1; lower
// half the lower k), KRw = R*S*C/2 words; table entry of word row kw {(r*DH*W + s*DW)*C/2 + c/2, r*DH, s*DW, 0}.
// One thread per output word; KRp * Kp8 + 4 * KRp words in all.
extern "C" __global__ void igemm_pack_16(const unsigned short* __restrict__ w, unsigned* __restrict__ filt, int K,
                                         int KRw, int KRp, int NB8, int RS, int S, int W, int DH, int DW, int C) {
  const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long weights = static_cast<long long>(KRp) * NB8 * 8;
  if (idx < weights) {
    const int j = static_cast<int>(idx & 1), slot = static_cast<int>((idx >> 1) & 31);
    const long long tile = idx >> 6;
    const int nb = static_cast<int>(tile % NB8), kb = static_cast<int>(tile / NB8);
    const int kw = kb * 8 + (slot >> 3) + 4 * j, k = nb * 8 + (slot & 7);
    unsigned v = 0;
    if (kw < KRw && k < K) {
      const int kr = 2 * kw, c = kr % C, rs = kr / C;
      const long long at = (static_cast<long long>(k) * C + c) * RS + rs;
      v = static_cast<unsigned>(w[at]) | (static_cast<unsigned>(w[at + RS]) << 16);
    }
    filt[idx] = v;
  } else if (idx < weights + 4LL * KRp && (idx - weights) % 4 == 0) {
    const int kw = static_cast<int>((idx - weights) / 4);
    int4 e = make_int4(0, -(1 << 29), 0, 0);
    if (kw < KRw) {
      const int kr = 2 * kw, c = kr % C, rs = kr / C;
      const int r = rs / S, s = rs - r * S;
      e = make_int4((r * DH * W + s * DW) * (C / 2) + c / 2, r * DH, s * DW, 0);
    }
    reinterpret_cast<int4*>(filt + weights)[kw] = e;
  }
}
