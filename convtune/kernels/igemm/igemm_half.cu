// The 16-bit implicit-GEMM forward (family igemm_half): bfloat16 / float16 x (N, C, H, W), w (K, C, R, S) and
// y (N, K, P, Q), mma.sync.m16n8k16 with fp32 accumulation, over an NHWC copy of x in 32-bit words of two channels.
//
// A file of its own that includes igemm_fwd.cu unchanged (the NHWC main loop, the epilogue, the conversion
// kernels, the 1x1 variant's pack): a kernel's version is the hash of its expanded source, so the TF32 families and
// igemm_half_1x1 keep theirs. What it adds is any channel count: a 16-byte copy of the main loop is 8 channels of
// one tap, so the NHWC workspace and the packed filters hold Cp = ceil(C/8)*8 channels, the ones past C zero
// (stems with C = 1 or 3, odd counts such as 13 or 35). The zero channels add nothing to y: the products of a zero
// filter word with a zero input word are exact zeros.
#include "igemm_fwd.cu"

// NCHW -> NHWC of x with Cp > C: one thread per (image, 8-channel group g, pixel p), consecutive threads
// consecutive pixels, so each of the 8 channel reads is coalesced across a warp and, for Cp = 8, the 16-byte stores
// are contiguous. xh (N, H*W, Cp); channels C..Cp-1 written as zeros. Grid-stride over N * (Cp/8) * HW threads.
// (C a multiple of 8 takes igemm_to_nhwc_16, the 32 x 32 tile transpose, unchanged.)
extern "C" __global__ void igemm_to_nhwc_pad8_16(const unsigned short* __restrict__ x, unsigned short* __restrict__ xh,
                                                 int C, int HW, int Cp, int N) {
  const int groups = Cp / 8;
  const long long total = static_cast<long long>(N) * groups * HW;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long ng = i / HW;
    const int p = static_cast<int>(i - ng * HW);
    const long long n = ng / groups;
    const int c0 = 8 * static_cast<int>(ng - n * groups);
    unsigned v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int c = c0 + 2 * j;
      const unsigned lo = c < C ? x[(n * C + c) * HW + p] : 0u;
      const unsigned hi = c + 1 < C ? x[(n * C + c + 1) * HW + p] : 0u;
      v[j] = lo | (hi << 16);
    }
    *reinterpret_cast<uint4*>(xh + (n * HW + p) * Cp + c0) = make_uint4(v[0], v[1], v[2], v[3]);
  }
}

// The 16-bit filter operand from w (K, Cs, R, S) bits over Cp >= Cs channels (Cp a multiple of 8, even): the
// igemm_pack_16 layout (igemm_fwd.cu) for a problem of Cp channels, the words of channels >= Cs zero. Word kw =
// elements kr = 2kw, 2kw + 1 of the (r, s, c) order over Cp; KRw = R*S*Cp/2; table entry of word row kw
// {(r*DH*W + s*DW)*Cp/2 + c/2, r*DH, s*DW, 0}. With Cs = Cp it writes what igemm_pack_16 writes.
extern "C" __global__ void igemm_pack_16_pad(const unsigned short* __restrict__ w, unsigned* __restrict__ filt,
                                             int K, int KRw, int KRp, int NB8, int RS, int S, int W, int DH, int DW,
                                             int Cp, int Cs) {
  const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long weights = static_cast<long long>(KRp) * NB8 * 8;
  if (idx < weights) {
    const int j = static_cast<int>(idx & 1), slot = static_cast<int>((idx >> 1) & 31);
    const long long tile = idx >> 6;
    const int nb = static_cast<int>(tile % NB8), kb = static_cast<int>(tile / NB8);
    const int kw = kb * 8 + (slot >> 3) + 4 * j, k = nb * 8 + (slot & 7);
    unsigned v = 0;
    if (kw < KRw && k < K) {
      const int kr = 2 * kw, c = kr % Cp, rs = kr / Cp;
      const long long at = (static_cast<long long>(k) * Cs + c) * RS + rs;
      const unsigned lo = c < Cs ? static_cast<unsigned>(w[at]) : 0u;
      const unsigned hi = c + 1 < Cs ? static_cast<unsigned>(w[at + RS]) : 0u;
      v = lo | (hi << 16);
    }
    filt[idx] = v;
  } else if (idx < weights + 4LL * KRp && (idx - weights) % 4 == 0) {
    const int kw = static_cast<int>((idx - weights) / 4);
    int4 e = make_int4(0, -(1 << 29), 0, 0);
    if (kw < KRw) {
      const int kr = 2 * kw, c = kr % Cp, rs = kr / Cp;
      const int r = rs / S, s = rs - r * S;
      e = make_int4((r * DH * W + s * DW) * (Cp / 2) + c / 2, r * DH, s * DW, 0);
    }
    reinterpret_cast<int4*>(filt + weights)[kw] = e;
  }
}
