// Pointwise (1x1) convolution forward for small GEMMs, float32 / bfloat16 / float16 storage, fp32 sums, NCHW,
// pad 0, any stride; the reduction over input channels sliced across the warps of one block.
//
//   y[n,k,p,q] = sum_c x[n, c, p*SH, q*SW] * w[k, c]
//
// The GEMM: M = N*P*Q output pixels (m = n*P*Q + p*Q + q), K output channels, reduction over C. A block owns BM
// pixels x BN channels. Its THREADS = SLICES * GROUP threads form SLICES groups of GROUP = (BM/TM)*(BN/TN); each
// group accumulates the whole BM x BN tile (TM x TN per thread) over its own BK channels of every CK = SLICES*BK
// channel chunk, and at the end the groups' partial tiles are summed through shared memory in a fixed order and y
// is written once, rounded once to T.
//
// Why: where M*K is small (batch-1 detection heads, 7x7 and 14x14 maps) a GEMM kernel has few output tiles; the
// split-C alternative (blocks over channel slices, atomics into a zeroed fp32 buffer, then a conversion for
// 16-bit y) costs a memset and, for 16-bit y, two more launches, each several microseconds of host time per call.
// Here every split lives in one block: one launch, no workspace, no atomics, a deterministic sum.
//
// Staging: two shared-memory buffers, each As[CK][BM] (x rows of CK channels, pixels contiguous, as float) and
// Bs[CK][BN] (rows of the packed filters wpk[c][Kp], fp32, output channels contiguous, zero past K). The next
// chunk is loaded into registers while the current one is computed, then stored to the other buffer; one barrier
// per chunk. THREADS is a multiple of BM and of BN, so a thread copies one fixed pixel (and one fixed filter
// column) for CK / (THREADS / BM) channel rows of x (CK / (THREADS / BN) rows of wpk): its x offsets are computed
// once. Group threads read As[c][tm*TM ..] and Bs[c][tn*TN ..] as TM- and TN-wide vectors (TM, TN in {2, 4}).
//
// The epilogue reuses the staging memory: groups 1..SLICES-1 store their tiles (value v of thread t of the group at
// [(s-1)*TM*TN + v][t]: a warp's stores are consecutive words), group 0 adds them in slice order and stores y.
#include "storage.cuh"

namespace convtune {

template <int V>
struct VecOf;
template <>
struct VecOf<2> {
  __device__ __forceinline__ static void load(const float* p, float* v) {
    const float2 f = *reinterpret_cast<const float2*>(p);
    v[0] = f.x, v[1] = f.y;
  }
};
template <>
struct VecOf<4> {
  __device__ __forceinline__ static void load(const float* p, float* v) {
    const float4 f = *reinterpret_cast<const float4*>(p);
    v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
  }
};

template <class T, int BM, int BN, int BK, int SLICES, int TM, int TN, int SH, int SW>
__device__ __forceinline__ void pointwise_sliced_body(const T* __restrict__ x, const float* __restrict__ wpk,
                                                      T* __restrict__ y, int N, int C, int H, int W, int K, int Kp,
                                                      int P, int Q) {
  constexpr int GROUP = (BM / TM) * (BN / TN);
  constexpr int THREADS = GROUP * SLICES;
  constexpr int CK = BK * SLICES;                  // channels per chunk, all groups
  constexpr int A_ROWS = THREADS / BM;             // x rows one pass of the block copies
  constexpr int B_ROWS = THREADS / BN;
  constexpr int NA = CK / A_ROWS, NB = CK / B_ROWS;  // copies per thread and chunk
  constexpr int BUF = CK * (BM + BN);              // floats of one staging buffer
  static_assert(TM == 2 || TM == 4, "TM: 2 or 4");
  static_assert(TN == 2 || TN == 4, "TN: 2 or 4");
  static_assert(GROUP % 32 == 0, "a group is whole warps");
  static_assert(THREADS % BM == 0 && THREADS % BN == 0, "a thread copies one fixed pixel and filter column");
  static_assert(CK % A_ROWS == 0 && CK % B_ROWS == 0, "every copy pass is whole");
  extern __shared__ __align__(16) float smem[];

  const int tid = threadIdx.x;
  const int PQ = P * Q;
  const long long M = static_cast<long long>(N) * PQ;
  const long long m0 = static_cast<long long>(blockIdx.x) * BM;
  const int k0 = blockIdx.y * BN;
  const long long HW = static_cast<long long>(H) * W;

  // This thread's copy duties: pixel a_m of x rows a_row + i*A_ROWS; filter column b_k of wpk rows b_row + i*B_ROWS.
  const int a_m = tid % BM, a_row = tid / BM;
  const long long m_copy = m0 + a_m;
  const bool a_ok = m_copy < M;
  long long a_off = 0;
  if (a_ok) {
    const long long n = m_copy / PQ;
    const int pq = static_cast<int>(m_copy - n * PQ);
    const int p = pq / Q, q = pq - (pq / Q) * Q;
    a_off = n * C * HW + static_cast<long long>(p) * SH * W + static_cast<long long>(q) * SW;
  }
  const int b_k = tid % BN, b_row = tid / BN;
  const bool b_ok = k0 + b_k < Kp;

  float ra[NA], rb[NB];
  auto load_regs = [&](int c0) {
#pragma unroll
    for (int i = 0; i < NA; ++i) {
      const int c = c0 + a_row + i * A_ROWS;
      ra[i] = (a_ok && c < C) ? ldg_f32(x + a_off + c * HW) : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < NB; ++i) {
      const int c = c0 + b_row + i * B_ROWS;
      rb[i] = (b_ok && c < C) ? __ldg(wpk + static_cast<long long>(c) * Kp + k0 + b_k) : 0.0f;
    }
  };
  auto store_regs = [&](int buf) {
    float* As = smem + buf * BUF;
    float* Bs = As + CK * BM;
#pragma unroll
    for (int i = 0; i < NA; ++i) As[(a_row + i * A_ROWS) * BM + a_m] = ra[i];
#pragma unroll
    for (int i = 0; i < NB; ++i) Bs[(b_row + i * B_ROWS) * BN + b_k] = rb[i];
  };

  const int slice = tid / GROUP, lt = tid % GROUP;
  const int tm = lt % (BM / TM), tn = lt / (BM / TM);
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

  const int chunks = (C + CK - 1) / CK;
  load_regs(0);
  store_regs(0);
  __syncthreads();
  for (int chunk = 0; chunk < chunks; ++chunk) {
    const bool more = chunk + 1 < chunks;
    if (more) load_regs((chunk + 1) * CK);
    const float* As = smem + (chunk & 1) * BUF + slice * BK * BM;
    const float* Bs = smem + (chunk & 1) * BUF + CK * BM + slice * BK * BN;
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float a[TM], b[TN];
      VecOf<TM>::load(As + kk * BM + tm * TM, a);
      VecOf<TN>::load(Bs + kk * BN + tn * TN, b);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    if (more) store_regs((chunk + 1) & 1);
    __syncthreads();
  }

  // Sum the groups' tiles in slice order (the last barrier of the loop ended every read of the staging buffers).
  if constexpr (SLICES > 1) {
    if (slice > 0) {
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) smem[((slice - 1) * TM * TN + i * TN + j) * GROUP + lt] = acc[i][j];
    }
    __syncthreads();
    if (slice > 0) return;
#pragma unroll
    for (int s = 1; s < SLICES; ++s)
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += smem[((s - 1) * TM * TN + i * TN + j) * GROUP + lt];
  }

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const long long m = m0 + tm * TM + i;
    if (m >= M) continue;
    const long long n = m / PQ;
    T* dst = y + n * K * PQ + (m - n * PQ);
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int k = k0 + tn * TN + j;
      if (k < K) dst[static_cast<long long>(k) * PQ] = from_f32<T>(acc[i][j]);
    }
  }
}

// The filter operand: wpk[c][k] = w[k][c] as float (k < K), 0 for K <= k < Kp; one thread per word.
template <class T>
__device__ __forceinline__ void pointwise_sliced_pack_body(const T* __restrict__ w, float* __restrict__ wpk, int K,
                                                           int Kp, int C) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<long long>(C) * Kp) return;
  const int c = static_cast<int>(i / Kp), k = static_cast<int>(i - static_cast<long long>(c) * Kp);
  wpk[i] = k < K ? to_f32(w[static_cast<long long>(k) * C + c]) : 0.0f;
}

}  // namespace convtune

extern "C" __global__ void pointwise_sliced_pack_f32(const float* __restrict__ w, float* __restrict__ wpk, int K,
                                                     int Kp, int C) {
  convtune::pointwise_sliced_pack_body(w, wpk, K, Kp, C);
}

extern "C" __global__ void pointwise_sliced_pack_bf16(const convtune::bfloat16* __restrict__ w,
                                                      float* __restrict__ wpk, int K, int Kp, int C) {
  convtune::pointwise_sliced_pack_body(w, wpk, K, Kp, C);
}

extern "C" __global__ void pointwise_sliced_pack_f16(const convtune::half16* __restrict__ w,
                                                     float* __restrict__ wpk, int K, int Kp, int C) {
  convtune::pointwise_sliced_pack_body(w, wpk, K, Kp, C);
}
