// Storage types of the wgmma kernels: the bits of one element in a struct (NVRTC has no cuda_bf16.h), so one kernel
// template serves every class. wg_bf16 / wg_f16: 16-bit storage, operands as stored, y rounded once (cvt.rn);
// wg_tf32: float32 storage, operands rounded to TF32 when the workspace and the filters are made (cvt.rna, as cuDNN
// and cuBLAS round), y float32 as accumulated. Named apart from storage.cuh's, whose common.cuh would clash with
// these kernels' helpers.
#pragma once
namespace convtune {
struct __align__(2) wg_bf16 {
  unsigned short bits;
};
struct __align__(2) wg_f16 {
  unsigned short bits;
};
struct __align__(4) wg_tf32 {
  unsigned bits;
};

// y's value of an fp32 accumulator: round to nearest even (16-bit), unchanged (TF32 kernels write float32)
template <class T>
__device__ __forceinline__ T round_to(float v);
template <>
__device__ __forceinline__ wg_bf16 round_to<wg_bf16>(float v) {
  wg_bf16 b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b.bits) : "f"(v));
  return b;
}
template <>
__device__ __forceinline__ wg_f16 round_to<wg_f16>(float v) {
  wg_f16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(v));
  return h;
}
template <>
__device__ __forceinline__ wg_tf32 round_to<wg_tf32>(float v) {
  return wg_tf32{__float_as_uint(v)};
}

// The tensor-core operand of a stored element's bits: 16-bit as stored; float32 rounded to TF32 (cvt.rna: nearest,
// ties away from zero, 10 mantissa bits kept)
template <class T>
__device__ __forceinline__ decltype(T::bits) operand_bits(decltype(T::bits) b) {
  if constexpr (sizeof(T) == 4) {
    unsigned out;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(out) : "f"(__uint_as_float(b)));
    return out;
  } else {
    return b;
  }
}

// wgmma.mma_async of one k-step for storage T and N columns, both operands K-major from shared-memory descriptors:
// specialised in wgmma_half_ss.cuh (16-bit, k16) and wgmma_tf32_ss.cuh (TF32, k8)
template <class T, int N>
struct WgmmaSS;
}  // namespace convtune
