// Direct convolution forward, fp32, NCHW: the output-stationary dataflow of the I/O lower bound.
//
//   y[n,k,p,q] = sum_{c,r,s} x[n, c, p*SH - pad_h + r*DH, q*SW - pad_w + s*DW] * w[k,c,r,s]
//
// One block owns an output tile of TH x TW pixels x TK output channels of one image (and one slice of
// the input channels when the reduction is split across blocks). It loops over its input channels in
// chunks of CB: the raw input patch (IH x IW per channel, halo included) and the weight slice
// (CB x R x S x TK) are staged in shared memory with cp.async (zero-filled outside the image and past
// the last channel / output channel), STAGES deep. Each thread accumulates a PY x PX x KX register
// micro-tile: per (channel, input row) it reads a register window of WIN input values once and reuses
// it for every filter column s, against KX weights read as float4 broadcasts.
//
// Weights are pre-packed as wpk[c][r][s][Kp] (Kp = K rounded up to 4, zero-padded) so each stage's
// weight slice is TK contiguous floats per (c, r, s): 16-byte copies, and conflict-free float4 reads.
//
// Template parameters are compile-time so every register array is indexed by constants.
#include "common.cuh"

namespace convtune {

template <int TH, int TW, int TK, int CB, int PY, int PX, int KX, int R, int S, int SH, int SW, int DH,
          int DW, int STAGES, int VEC, int IWP>
struct DirectFwdTraits {
  static constexpr int IH = (TH - 1) * SH + (R - 1) * DH + 1;   // input rows of the patch
  static constexpr int IW = (TW - 1) * SW + (S - 1) * DW + 1;   // input cols of the patch
  static constexpr int NPG = (TH / PY) * (TW / PX);              // pixel groups (threads along pixels)
  static constexpr int NKG = TK / KX;                            // channel groups
  static constexpr int THREADS = NPG * NKG;
  // floats per stage, input patch; rounded up to 16 bytes so the weight slice after it stays aligned
  static constexpr int IN_STAGE = (CB * IH * IWP + 3) / 4 * 4;
  static constexpr int W_STAGE = CB * R * S * TK;                // floats per stage, weight slice
  static constexpr int STAGE = IN_STAGE + W_STAGE;
  static constexpr int WIN = (PX - 1) * SW + (S - 1) * DW + 1;  // register window per input row
  static constexpr int ROWS = (PY - 1) * SH + (R - 1) * DH + 1; // input rows one thread touches
  static_assert(TH % PY == 0 && TW % PX == 0 && TK % KX == 0, "tile must divide evenly into threads");
  static_assert(KX % 4 == 0 && TK % 4 == 0, "weights are read as float4");
  static_assert(STAGES >= 1 && STAGES <= 4, "1..4 pipeline stages");
  static_assert(VEC == 1 || VEC == 4, "input copy width: 1 or 4 floats");
  static_assert(IWP >= IW + (VEC == 4 ? 3 : 0), "patch pitch too small");
  static_assert(VEC == 1 || IWP % 4 == 0, "16-byte copies need a pitch multiple of 4");
  static_assert(THREADS >= 32 && THREADS <= 1024, "threads per block");
};

template <int TH, int TW, int TK, int CB, int PY, int PX, int KX, int R, int S, int SH, int SW, int DH,
          int DW, int STAGES, int VEC, int IWP, bool ATOMIC>
__device__ __forceinline__ void direct_fwd_body(const float* __restrict__ x, const float* __restrict__ wpk,
                                                float* __restrict__ y, int C, int H, int W, int K, int Kp,
                                                int P, int Q, int pad_h, int pad_w, int tiles_q,
                                                int chunks_per_split, int splits) {
  using T = DirectFwdTraits<TH, TW, TK, CB, PY, PX, KX, R, S, SH, SW, DH, DW, STAGES, VEC, IWP>;
  extern __shared__ __align__(16) float smem[];

  const int tid = threadIdx.x;
  const int k0 = blockIdx.x * TK;
  const int tp = blockIdx.y / tiles_q;
  const int tq = blockIdx.y - tp * tiles_q;
  const int n = blockIdx.z / splits;
  const int split = blockIdx.z - n * splits;
  const int oy0 = tp * TH, ox0 = tq * TW;
  const int c_begin = split * chunks_per_split * CB;
  const int c_end = min(C, c_begin + chunks_per_split * CB);
  const int nchunks = (c_end - c_begin + CB - 1) / CB;
  if (nchunks <= 0) return;  // empty split: contributes nothing to the (zeroed) output

  const int ih0 = oy0 * SH - pad_h;
  const int iw0 = ox0 * SW - pad_w;
  // VEC=4: fetch whole aligned 16-byte segments; smem column j holds input column iw_base + j.
  const int iw_base = VEC == 4 ? ((iw0 >> 2) << 2) : iw0;
  const int col_shift = iw0 - iw_base;
  const float* xn = x + static_cast<long long>(n) * C * H * W;

  // Per-thread copy duties, fixed for every chunk (so the chunk loop only bumps base pointers).
  // Input: this thread copies plane positions pos = tid + i*THREADS of the IH x IWL patch (IWL columns,
  // or IWL 16-byte segments when VEC == 4) for each of the CB channels of a chunk.
  constexpr int IWL = VEC == 4 ? IWP / 4 : T::IW;
  constexpr int PLANE = T::IH * IWL;
  constexpr int NI = (PLANE + T::THREADS - 1) / T::THREADS;
  const int HW = H * W;
  int in_goff[NI], in_soff[NI];
  bool in_ok[NI], in_live[NI];
#pragma unroll
  for (int i = 0; i < NI; ++i) {
    const int pos = tid + i * T::THREADS;
    const int row = pos / IWL;
    const int col = pos - row * IWL;
    const int ih = ih0 + row;
    const int iw = VEC == 4 ? iw_base + 4 * col : iw0 + col;
    in_live[i] = pos < PLANE;
    // W % 4 == 0 when VEC == 4 (checked by the launcher): a segment is wholly inside or outside a row.
    in_ok[i] = in_live[i] && static_cast<unsigned>(ih) < static_cast<unsigned>(H) &&
               static_cast<unsigned>(iw) < static_cast<unsigned>(W);
    in_goff[i] = in_ok[i] ? ih * W + iw : 0;
    in_soff[i] = row * IWP + (VEC == 4 ? 4 * col : col);
  }
  // Weights: this thread copies 16-byte segment `wseg` of rows crs = wrow0 + j*WROW_STEP of the chunk's
  // CB*R*S rows of TK floats.
  constexpr int WSEG = TK / 4;
  static_assert(T::THREADS % WSEG == 0, "threads must be a multiple of TK/4");
  constexpr int WROW_STEP = T::THREADS / WSEG;
  constexpr int NW = (CB * R * S + WROW_STEP - 1) / WROW_STEP;
  const int wseg = tid % WSEG;
  const int wrow0 = tid / WSEG;
  const bool w_kok = k0 + 4 * wseg < Kp;

  auto load_stage = [&](int slot, int chunk) {
    float* s_in = smem + slot * T::STAGE;
    float* s_w = s_in + T::IN_STAGE;
    const int c0 = c_begin + chunk * CB;
    const float* xc = xn + static_cast<long long>(c0) * HW;
#pragma unroll
    for (int cc = 0; cc < CB; ++cc) {
      const bool c_ok = c0 + cc < c_end;
#pragma unroll
      for (int i = 0; i < NI; ++i) {
        if (NI * T::THREADS == PLANE || in_live[i]) {
          const bool ok = c_ok && in_ok[i];
          const float* src = ok ? xc + in_goff[i] : xn;
          if constexpr (VEC == 4) {
            cp_async16(s_in + cc * T::IH * IWP + in_soff[i], src, ok);
          } else {
            cp_async4(s_in + cc * T::IH * IWP + in_soff[i], src, ok);
          }
        }
      }
      xc += HW;
    }
    const int rows_valid = (c_end - c0) * R * S;  // weight rows of real channels in this chunk
    const float* wsrc = wpk + (static_cast<long long>(c0) * R * S + wrow0) * Kp + k0 + 4 * wseg;
#pragma unroll
    for (int j = 0; j < NW; ++j) {
      const int crs = wrow0 + j * WROW_STEP;
      if ((CB * R * S) % WROW_STEP == 0 || crs < CB * R * S) {
        const bool ok = w_kok && crs < rows_valid;
        cp_async16(s_w + crs * TK + 4 * wseg, ok ? wsrc + static_cast<long long>(j) * WROW_STEP * Kp : wpk, ok);
      }
    }
  };

  // Thread -> micro-tile: consecutive threads take consecutive pixel groups so a warp shares its
  // channel group (weight reads are broadcasts).
  const int pg = tid % T::NPG;
  const int kg = tid / T::NPG;
  const int gy = pg / (TW / PX);
  const int gx = pg - gy * (TW / PX);
  const int in_off = gy * PY * SH * IWP + gx * PX * SW + col_shift;
  const int w_off = kg * KX;

  float acc[PY][PX][KX];
#pragma unroll
  for (int a = 0; a < PY; ++a)
#pragma unroll
    for (int b = 0; b < PX; ++b)
#pragma unroll
      for (int v = 0; v < KX; ++v) acc[a][b][v] = 0.0f;

  auto compute_stage = [&](int slot) {
    const float* s_in = smem + slot * T::STAGE + in_off;
    const float* s_w = smem + slot * T::STAGE + T::IN_STAGE + w_off;
#pragma unroll
    for (int cc = 0; cc < CB; ++cc) {
#pragma unroll
      for (int ir = 0; ir < T::ROWS; ++ir) {
        float win[T::WIN];
#pragma unroll
        for (int t = 0; t < T::WIN; ++t) win[t] = s_in[(cc * T::IH + ir) * IWP + t];
#pragma unroll
        for (int py = 0; py < PY; ++py) {
          const int dr = ir - py * SH;
          if (dr >= 0 && dr % DH == 0 && dr / DH < R) {
            const int r = dr / DH;
#pragma unroll
            for (int s = 0; s < S; ++s) {
              float wv[KX];
#pragma unroll
              for (int v = 0; v < KX / 4; ++v) {
                const float4 w4 = *reinterpret_cast<const float4*>(s_w + ((cc * R + r) * S + s) * TK + 4 * v);
                wv[4 * v + 0] = w4.x;
                wv[4 * v + 1] = w4.y;
                wv[4 * v + 2] = w4.z;
                wv[4 * v + 3] = w4.w;
              }
#pragma unroll
              for (int px = 0; px < PX; ++px)
#pragma unroll
                for (int v = 0; v < KX; ++v) acc[py][px][v] = fmaf(win[px * SW + s * DW], wv[v], acc[py][px][v]);
            }
          }
        }
      }
    }
  };

  // Software pipeline: STAGES-1 chunks in flight while one is computed; one barrier per chunk.
  if constexpr (STAGES == 1) {
    for (int chunk = 0; chunk < nchunks; ++chunk) {
      load_stage(0, chunk);
      cp_async_commit();
      cp_async_wait<0>();
      __syncthreads();
      compute_stage(0);
      __syncthreads();
    }
  } else {
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < nchunks) load_stage(s, s);
      cp_async_commit();
    }
    for (int chunk = 0; chunk < nchunks; ++chunk) {
      cp_async_wait<STAGES - 2>();
      __syncthreads();  // chunk's data visible; everyone is done with the slot refilled below
      const int next = chunk + STAGES - 1;
      if (next < nchunks) load_stage(next % STAGES, next);
      cp_async_commit();
      compute_stage(chunk % STAGES);
    }
  }

  // Epilogue: each output written once (or added once per split).
  const long long out_plane = static_cast<long long>(P) * Q;
  const bool vec_store = !ATOMIC && (PX % 4 == 0) && (Q % 4 == 0);
#pragma unroll
  for (int py = 0; py < PY; ++py) {
    const int oy = oy0 + gy * PY + py;
    if (oy >= P) continue;
#pragma unroll
    for (int v = 0; v < KX; ++v) {
      const int k = k0 + kg * KX + v;
      if (k >= K) continue;
      float* yrow = y + (static_cast<long long>(n) * K + k) * out_plane + static_cast<long long>(oy) * Q;
#pragma unroll
      for (int px = 0; px < PX; ++px) {
        const int ox = ox0 + gx * PX + px;
        if constexpr (PX % 4 == 0) {
          if (vec_store && px % 4 == 0) {
            if (ox < Q) {
              *reinterpret_cast<float4*>(yrow + ox) =
                  make_float4(acc[py][px][v], acc[py][px + 1][v], acc[py][px + 2][v], acc[py][px + 3][v]);
            }
            continue;
          }
          if (vec_store) continue;
        }
        if (ox < Q) {
          if constexpr (ATOMIC) {
            atomicAdd(yrow + ox, acc[py][px][v]);
          } else {
            yrow[ox] = acc[py][px][v];
          }
        }
      }
    }
  }
}

}  // namespace convtune

// Weight pre-pack: w[K][C][R][S] -> wpk[C][R][S][Kp], zero for k >= K. One thread per packed element.
extern "C" __global__ void direct_pack_weights(const float* __restrict__ w, float* __restrict__ wpk, int K,
                                               int Kp, int CRS) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<long long>(CRS) * Kp) return;
  const int crs = static_cast<int>(i / Kp);
  const int k = static_cast<int>(i - static_cast<long long>(crs) * Kp);
  wpk[i] = k < K ? w[static_cast<long long>(k) * CRS + crs] : 0.0f;
}
