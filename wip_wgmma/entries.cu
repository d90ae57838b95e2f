#include "igemm_wgmma_fwd.cu"

extern "C" __global__ void __launch_bounds__(128) wg_fwd_128_1_1_4_1_16_1024_0(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_fwd_body<128, 1, 1, 4, 1, 16, 1024, 0>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(128) wg_fwd_128_1_1_4_1_16_1024_1(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_fwd_body<128, 1, 1, 4, 1, 16, 1024, 1>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(128) wg_fwd_128_1_1_4_0_128_1024_0(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_fwd_body<128, 1, 1, 4, 0, 128, 1024, 0>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(128) wg_fwd_128_1_1_4_0_1024_128_0(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_fwd_body<128, 1, 1, 4, 0, 1024, 128, 0>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(128) wg_fwd_64_1_1_3_1_16_1024_0(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_fwd_body<64, 1, 1, 3, 1, 16, 1024, 0>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(128) wg_fwd_64_1_1_4_1_16_1024_0(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_fwd_body<64, 1, 1, 4, 1, 16, 1024, 0>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(256) wg_fwd_64_1_2_3_1_16_1024_0(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_fwd_body<64, 1, 2, 3, 1, 16, 1024, 0>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(256) wg_fwd_64_1_2_4_1_16_1024_0(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_fwd_body<64, 1, 2, 4, 1, 16, 1024, 0>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(128) wg_fwd_64_2_1_3_1_16_1024_0(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_fwd_body<64, 2, 1, 3, 1, 16, 1024, 0>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(128) wg_fwd_64_2_1_4_1_16_1024_0(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_fwd_body<64, 2, 1, 4, 1, 16, 1024, 0>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(256) wg_fwd_64_2_2_3_1_16_1024_0(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_fwd_body<64, 2, 2, 3, 1, 16, 1024, 0>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(256) wg_fwd_64_2_2_4_1_16_1024_0(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_fwd_body<64, 2, 2, 4, 1, 16, 1024, 0>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(128) wg_fwd_128_1_1_3_1_16_1024_0(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_fwd_body<128, 1, 1, 3, 1, 16, 1024, 0>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(256) wg_fwd_128_1_2_3_1_16_1024_0(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_fwd_body<128, 1, 2, 3, 1, 16, 1024, 0>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(256) wg_fwd_128_1_2_4_1_16_1024_0(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_fwd_body<128, 1, 2, 4, 1, 16, 1024, 0>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(128) wg_fwd_128_2_1_3_1_16_1024_0(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_fwd_body<128, 2, 1, 3, 1, 16, 1024, 0>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(128) wg_fwd_128_2_1_4_1_16_1024_0(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_fwd_body<128, 2, 1, 4, 1, 16, 1024, 0>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(256) wg_fwd_128_2_2_3_1_16_1024_0(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_fwd_body<128, 2, 2, 3, 1, 16, 1024, 0>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(256) wg_fwd_128_2_2_4_1_16_1024_0(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_fwd_body<128, 2, 2, 4, 1, 16, 1024, 0>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(128) wg_fwd_256_1_1_3_1_16_1024_0(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_fwd_body<256, 1, 1, 3, 1, 16, 1024, 0>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(128) wg_fwd_256_1_1_4_1_16_1024_0(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_fwd_body<256, 1, 1, 4, 1, 16, 1024, 0>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(256) wg_fwd_256_1_2_3_1_16_1024_0(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_fwd_body<256, 1, 2, 3, 1, 16, 1024, 0>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(256) wg_fwd_256_1_2_4_1_16_1024_0(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_fwd_body<256, 1, 2, 4, 1, 16, 1024, 0>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(128) wg_nhwc_64_1_1_4(const float* __restrict__ xt, const float* __restrict__ filt, float* __restrict__ y, int N, int Cp, int H, int W, int K, int P, int Q, int S, int SH, int SW, int PH, int PW, int DH, int DW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_nhwc_body<64, 1, 1, 4>(xt, filt, y, N, Cp, H, W, K, P, Q, S, SH, SW, PH, PW, DH, DW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(128) wg_nhwc_64_1_1_6(const float* __restrict__ xt, const float* __restrict__ filt, float* __restrict__ y, int N, int Cp, int H, int W, int K, int P, int Q, int S, int SH, int SW, int PH, int PW, int DH, int DW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_nhwc_body<64, 1, 1, 6>(xt, filt, y, N, Cp, H, W, K, P, Q, S, SH, SW, PH, PW, DH, DW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(256) wg_nhwc_64_1_2_4(const float* __restrict__ xt, const float* __restrict__ filt, float* __restrict__ y, int N, int Cp, int H, int W, int K, int P, int Q, int S, int SH, int SW, int PH, int PW, int DH, int DW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_nhwc_body<64, 1, 2, 4>(xt, filt, y, N, Cp, H, W, K, P, Q, S, SH, SW, PH, PW, DH, DW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(256) wg_nhwc_64_1_2_6(const float* __restrict__ xt, const float* __restrict__ filt, float* __restrict__ y, int N, int Cp, int H, int W, int K, int P, int Q, int S, int SH, int SW, int PH, int PW, int DH, int DW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_nhwc_body<64, 1, 2, 6>(xt, filt, y, N, Cp, H, W, K, P, Q, S, SH, SW, PH, PW, DH, DW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(128) wg_nhwc_64_2_1_4(const float* __restrict__ xt, const float* __restrict__ filt, float* __restrict__ y, int N, int Cp, int H, int W, int K, int P, int Q, int S, int SH, int SW, int PH, int PW, int DH, int DW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_nhwc_body<64, 2, 1, 4>(xt, filt, y, N, Cp, H, W, K, P, Q, S, SH, SW, PH, PW, DH, DW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(128) wg_nhwc_64_2_1_6(const float* __restrict__ xt, const float* __restrict__ filt, float* __restrict__ y, int N, int Cp, int H, int W, int K, int P, int Q, int S, int SH, int SW, int PH, int PW, int DH, int DW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_nhwc_body<64, 2, 1, 6>(xt, filt, y, N, Cp, H, W, K, P, Q, S, SH, SW, PH, PW, DH, DW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(256) wg_nhwc_64_2_2_4(const float* __restrict__ xt, const float* __restrict__ filt, float* __restrict__ y, int N, int Cp, int H, int W, int K, int P, int Q, int S, int SH, int SW, int PH, int PW, int DH, int DW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_nhwc_body<64, 2, 2, 4>(xt, filt, y, N, Cp, H, W, K, P, Q, S, SH, SW, PH, PW, DH, DW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(128) wg_nhwc_128_1_1_4(const float* __restrict__ xt, const float* __restrict__ filt, float* __restrict__ y, int N, int Cp, int H, int W, int K, int P, int Q, int S, int SH, int SW, int PH, int PW, int DH, int DW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_nhwc_body<128, 1, 1, 4>(xt, filt, y, N, Cp, H, W, K, P, Q, S, SH, SW, PH, PW, DH, DW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(128) wg_nhwc_128_1_1_6(const float* __restrict__ xt, const float* __restrict__ filt, float* __restrict__ y, int N, int Cp, int H, int W, int K, int P, int Q, int S, int SH, int SW, int PH, int PW, int DH, int DW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_nhwc_body<128, 1, 1, 6>(xt, filt, y, N, Cp, H, W, K, P, Q, S, SH, SW, PH, PW, DH, DW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(256) wg_nhwc_128_1_2_4(const float* __restrict__ xt, const float* __restrict__ filt, float* __restrict__ y, int N, int Cp, int H, int W, int K, int P, int Q, int S, int SH, int SW, int PH, int PW, int DH, int DW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_nhwc_body<128, 1, 2, 4>(xt, filt, y, N, Cp, H, W, K, P, Q, S, SH, SW, PH, PW, DH, DW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(256) wg_nhwc_128_1_2_6(const float* __restrict__ xt, const float* __restrict__ filt, float* __restrict__ y, int N, int Cp, int H, int W, int K, int P, int Q, int S, int SH, int SW, int PH, int PW, int DH, int DW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_nhwc_body<128, 1, 2, 6>(xt, filt, y, N, Cp, H, W, K, P, Q, S, SH, SW, PH, PW, DH, DW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(128) wg_nhwc_128_2_1_4(const float* __restrict__ xt, const float* __restrict__ filt, float* __restrict__ y, int N, int Cp, int H, int W, int K, int P, int Q, int S, int SH, int SW, int PH, int PW, int DH, int DW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_nhwc_body<128, 2, 1, 4>(xt, filt, y, N, Cp, H, W, K, P, Q, S, SH, SW, PH, PW, DH, DW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(128) wg_nhwc_128_2_1_6(const float* __restrict__ xt, const float* __restrict__ filt, float* __restrict__ y, int N, int Cp, int H, int W, int K, int P, int Q, int S, int SH, int SW, int PH, int PW, int DH, int DW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_nhwc_body<128, 2, 1, 6>(xt, filt, y, N, Cp, H, W, K, P, Q, S, SH, SW, PH, PW, DH, DW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(256) wg_nhwc_128_2_2_4(const float* __restrict__ xt, const float* __restrict__ filt, float* __restrict__ y, int N, int Cp, int H, int W, int K, int P, int Q, int S, int SH, int SW, int PH, int PW, int DH, int DW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_nhwc_body<128, 2, 2, 4>(xt, filt, y, N, Cp, H, W, K, P, Q, S, SH, SW, PH, PW, DH, DW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(128) wg_nhwc_256_1_1_4(const float* __restrict__ xt, const float* __restrict__ filt, float* __restrict__ y, int N, int Cp, int H, int W, int K, int P, int Q, int S, int SH, int SW, int PH, int PW, int DH, int DW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_nhwc_body<256, 1, 1, 4>(xt, filt, y, N, Cp, H, W, K, P, Q, S, SH, SW, PH, PW, DH, DW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(256) wg_nhwc_256_1_2_4(const float* __restrict__ xt, const float* __restrict__ filt, float* __restrict__ y, int N, int Cp, int H, int W, int K, int P, int Q, int S, int SH, int SW, int PH, int PW, int DH, int DW, int KRp, int chunks_per_split) {
  convtune::igemm_wgmma_nhwc_body<256, 1, 2, 4>(xt, filt, y, N, Cp, H, W, K, P, Q, S, SH, SW, PH, PW, DH, DW, KRp, chunks_per_split);
}
extern "C" __global__ void __launch_bounds__(256) wg_transform(const float* __restrict__ x, float* __restrict__ xt, int C, int HW, int Cp) {
  convtune::igemm_wgmma_nhwc_transform_body(x, xt, C, HW, Cp);
}
extern "C" __global__ void wg_nhwc_pack(const float* __restrict__ w, float* __restrict__ filt, int K, int C, int R, int S, int Cp) {
  convtune::igemm_wgmma_nhwc_pack_body(w, filt, K, C, R, S, Cp);
}
extern "C" __global__ void wg_pack(const float* __restrict__ w, float* __restrict__ filt, int K, int C, int R, int S, int H, int W, int DH, int DW, int KRp) {
  convtune::igemm_wgmma_pack_body(w, filt, K, C, R, S, H, W, DH, DW, KRp);
}
