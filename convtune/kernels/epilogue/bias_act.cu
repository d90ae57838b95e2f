// The convolution epilogue as one pass: out = act(y + bias[k] (+ residual)), NCHW contiguous, float32 / bfloat16 /
// float16 storage, fp32 arithmetic, bias fp32.
//
//   out[n,k,p,q] = act(y[n,k,p,q] + bias[k] + res[n,k,p,q])
//   act: 0 identity, 1 relu, 2 relu6 (= clamp 0..6), 3 silu v/(1+e^-v), 4 hardswish v·clamp(v+3, 0, 6)/6,
//        5 hardsigmoid clamp(v+3, 0, 6)/6, 6 sigmoid 1/(1+e^-v)   (PyTorch's CUDA formulas, expf not __expf)
//
// Why: an inference network's conv -> BatchNorm -> ReLU (-> + identity -> ReLU) runs, after BatchNorm is folded into
// the filters, as conv + this one pass over y (read y and the residual, write out) instead of PyTorch's BatchNorm,
// add and activation passes (each a read and a write of the whole map, each a launch). ``out`` may be ``y`` (in
// place). NaN propagates as in PyTorch's activations (a comparison with NaN is false: the value is kept).
//
// Thread i handles elements [i*V, i*V + V) of the flat tensor, V = 4 when H*W % 4 == 0 (the four share one channel,
// one 16- or 8-byte access each; the caller checks the pointers' alignment), else V = 1. total = N*K*H*W < 2^31.
#include "storage.cuh"

namespace convtune {

__device__ __forceinline__ float clamp06(float v) { return v < 0.f ? 0.f : (v > 6.f ? 6.f : v); }

__device__ __forceinline__ float activate(float v, int act) {
  switch (act) {  // uniform across the grid: no divergence
    case 1: return v < 0.f ? 0.f : v;
    case 2: return clamp06(v);
    case 3: return v / (1.f + expf(-v));
    case 4: return v * clamp06(v + 3.f) / 6.f;
    case 5: return clamp06(v + 3.f) / 6.f;
    case 6: return 1.f / (1.f + expf(-v));
    default: return v;
  }
}

template <class T, int V>
__device__ __forceinline__ void bias_act(const T* y, const float* __restrict__ bias,
                                         const T* __restrict__ res, T* out, int hw, int K, int total_vec, int act,
                                         int has_res) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= total_vec) return;
  const int e = i * V;
  const float b = __ldg(bias + (e / hw) % K);
  if constexpr (V == 4) {
    float v[4], r[4] = {0.f, 0.f, 0.f, 0.f};
    load4_f32(y + e, v);
    if (has_res) load4_f32(res + e, r);
    store4_f32(out + e, activate(v[0] + b + r[0], act), activate(v[1] + b + r[1], act),
               activate(v[2] + b + r[2], act), activate(v[3] + b + r[3], act));
  } else {
    const float r = has_res ? to_f32(res[e]) : 0.f;
    out[e] = from_f32<T>(activate(to_f32(y[e]) + b + r, act));
  }
}

}  // namespace convtune

#define CONVTUNE_BIAS_ACT(NAME, T, V)                                                                           \
  extern "C" __global__ void __launch_bounds__(256)                                                              \
      NAME(const T* y, const float* __restrict__ bias, const T* __restrict__ res, T* out, int hw,    \
           int K, int total_vec, int act, int has_res) {                                                         \
    convtune::bias_act<T, V>(y, bias, res, out, hw, K, total_vec, act, has_res);                                 \
  }

CONVTUNE_BIAS_ACT(bias_act_float32_v1, float, 1)
CONVTUNE_BIAS_ACT(bias_act_float32_v4, float, 4)
CONVTUNE_BIAS_ACT(bias_act_bfloat16_v1, convtune::bfloat16, 1)
CONVTUNE_BIAS_ACT(bias_act_bfloat16_v4, convtune::bfloat16, 4)
CONVTUNE_BIAS_ACT(bias_act_float16_v1, convtune::half16, 1)
CONVTUNE_BIAS_ACT(bias_act_float16_v4, convtune::half16, 4)
