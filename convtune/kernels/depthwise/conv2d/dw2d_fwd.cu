// 2-D depthwise forward, NCHW fp32, any R×S, stride SH×SW, any padding (dilation 1):
//   y[n,c,p,q] = Σ_{r<R, s<S} w[c,r,s] · x[n, c, p·SH − pad_h + r, q·SW − pad_w + s]   (zero outside the image)
// w has shape (C, 1, R, S). Planes are (n, c) pairs, plane = n·C + c.
//
// A block covers PB consecutive planes × one TH×TW output tile. It stages each plane's input patch
// IH×IW (IH = (TH−1)·SH + R, IW = (TW−1)·SW + S; zero-filled outside the image, nothing read there) in
// shared memory with row pitch PITCH; a thread owns VW consecutive outputs of one tile row of one plane,
// keeps the plane's R·S taps in registers and slides a register window of (VW−1)·SW + S inputs along each
// of the R patch rows. Block index: tile fastest (tiles_p·tiles_q of them), then plane group.
namespace convtune {
namespace dw {

template <int R, int S, int SH, int SW, int TH, int TW, int VW, int PB, int PITCH>
__device__ __forceinline__ void dw2d_fwd_body(const float* __restrict__ x, const float* __restrict__ w,
                                              float* __restrict__ y, int NC, int C, int H, int W, int P, int Q,
                                              int pad_h, int pad_w, int tiles_q, int ntiles) {
  constexpr int IH = (TH - 1) * SH + R, IW = (TW - 1) * SW + S;
  constexpr int TPR = TW / VW, TPP = TH * TPR;  // threads per tile row, per plane
  constexpr int THREADS = PB * TPP;
  constexpr int WIN = (VW - 1) * SW + S;
  static_assert(TW % VW == 0, "VW must divide TW");
  static_assert(PITCH >= IW, "PITCH must cover the patch width");
  extern __shared__ float smem[];  // [PB][IH][PITCH]
  const int tile = blockIdx.x % ntiles, pg = blockIdx.x / ntiles;
  const int tp = tile / tiles_q, tq = tile - (tile / tiles_q) * tiles_q;
  const int oh0 = tp * TH, ow0 = tq * TW;
  const int ih0 = oh0 * SH - pad_h, iw0 = ow0 * SW - pad_w;
  for (int i = threadIdx.x; i < PB * IH * IW; i += THREADS) {
    const int pl = i / (IH * IW), rem = i - (i / (IH * IW)) * (IH * IW);
    const int r = rem / IW, s = rem - (rem / IW) * IW;
    const int plane = pg * PB + pl, h = ih0 + r, ww = iw0 + s;
    const bool ok = plane < NC && h >= 0 && h < H && ww >= 0 && ww < W;
    smem[(pl * IH + r) * PITCH + s] = ok ? x[(plane * H + h) * W + ww] : 0.f;
  }
  const int pl = threadIdx.x / TPP, rem = threadIdx.x - (threadIdx.x / TPP) * TPP;
  const int oh = rem / TPR, ow = (rem - (rem / TPR) * TPR) * VW;
  const int plane = pg * PB + pl;
  float wr[R * S];
#pragma unroll
  for (int k = 0; k < R * S; ++k) wr[k] = plane < NC ? __ldg(w + (plane % C) * (R * S) + k) : 0.f;
  __syncthreads();
  float acc[VW];
#pragma unroll
  for (int v = 0; v < VW; ++v) acc[v] = 0.f;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float* row = smem + (pl * IH + oh * SH + r) * PITCH + ow * SW;
    float win[WIN];
#pragma unroll
    for (int k = 0; k < WIN; ++k) win[k] = row[k];
#pragma unroll
    for (int v = 0; v < VW; ++v) {
#pragma unroll
      for (int s = 0; s < S; ++s) acc[v] = fmaf(wr[r * S + s], win[v * SW + s], acc[v]);
    }
  }
  const int p = oh0 + oh;
  if (plane >= NC || p >= P) return;
#pragma unroll
  for (int v = 0; v < VW; ++v) {
    const int q = ow0 + ow + v;
    if (q < Q) y[(plane * P + p) * Q + q] = acc[v];
  }
}

}  // namespace dw
}  // namespace convtune
