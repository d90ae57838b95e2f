// Storage types of kernel tensors: float, or 16-bit IEEE half (half16) / bfloat16 with every sum in fp32.
// The 16-bit types are plain 2-byte structs converted by inline PTX, so that NVRTC needs no CUDA headers
// (cuda_fp16.h / cuda_bf16.h are not on the include path convtune compiles with).
//
//   to_f32(v)            element -> float (exact for all three types)
//   from_f32<T>(f)       float -> element, round to nearest even (cvt.rn)
//   ldg_f32(p)           read-only-cache load of one element as float
//   load4_f32(p, v)      four consecutive elements as floats: one 16-byte (float) or 8-byte (16-bit) access
//   store4_f32(p, a..d)  the converse store;  copy4(dst, src): four raw elements, one access
//   cp_async_elems<N>    global -> shared copy of N elements with zero fill: cp.async for 4, 8 or 16 bytes;
//                        a single 16-bit element (2 bytes, not a cp.async size) is a plain load and store
//
// Vector accesses need their address aligned to the access: 4 elements of T (16 or 8 bytes).
#pragma once

#include "common.cuh"

namespace convtune {

struct __align__(2) half16 {
  unsigned short bits;
};
struct __align__(2) bfloat16 {
  unsigned short bits;
};

__device__ __forceinline__ float to_f32(float v) { return v; }

__device__ __forceinline__ float to_f32(half16 v) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits));
  return f;
}

__device__ __forceinline__ float to_f32(bfloat16 v) { return __uint_as_float(static_cast<unsigned>(v.bits) << 16); }

template <class T>
__device__ __forceinline__ T from_f32(float v);

template <>
__device__ __forceinline__ float from_f32<float>(float v) {
  return v;
}

template <>
__device__ __forceinline__ half16 from_f32<half16>(float v) {
  half16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(v));
  return h;
}

template <>
__device__ __forceinline__ bfloat16 from_f32<bfloat16>(float v) {
  bfloat16 b;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b.bits) : "f"(v));
#else  // round to nearest even on the bits; a NaN stays a (quiet) NaN
  const unsigned u = __float_as_uint(v);
  b.bits = (u & 0x7fffffffu) > 0x7f800000u ? static_cast<unsigned short>((u >> 16) | 0x40u)
                                           : static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
  return b;
}

// select_type<B, A, C>::type is A when B, else C (std::conditional without <type_traits>, which NVRTC lacks).
template <bool B, class A, class C>
struct select_type {
  using type = A;
};
template <class A, class C>
struct select_type<false, A, C> {
  using type = C;
};

template <class T>
__device__ __forceinline__ T bits_to(unsigned v) {
  T t;
  t.bits = static_cast<unsigned short>(v);
  return t;
}

template <class T>
__device__ __forceinline__ float ldg_f32(const T* p) {
  if constexpr (sizeof(T) == 4) {
    return __ldg(reinterpret_cast<const float*>(p));
  } else {
    return to_f32(bits_to<T>(__ldg(reinterpret_cast<const unsigned short*>(p))));
  }
}

template <class T>
__device__ __forceinline__ void load4_f32(const T* p, float (&v)[4]) {
  if constexpr (sizeof(T) == 4) {
    const float4 f = *reinterpret_cast<const float4*>(p);
    v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
  } else {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    v[0] = to_f32(bits_to<T>(u.x & 0xffffu)), v[1] = to_f32(bits_to<T>(u.x >> 16));
    v[2] = to_f32(bits_to<T>(u.y & 0xffffu)), v[3] = to_f32(bits_to<T>(u.y >> 16));
  }
}

template <class T>
__device__ __forceinline__ void store4_f32(T* p, float a, float b, float c, float d) {
  if constexpr (sizeof(T) == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(a, b, c, d);
  } else {
    uint2 u;
    u.x = static_cast<unsigned>(from_f32<T>(a).bits) | (static_cast<unsigned>(from_f32<T>(b).bits) << 16);
    u.y = static_cast<unsigned>(from_f32<T>(c).bits) | (static_cast<unsigned>(from_f32<T>(d).bits) << 16);
    *reinterpret_cast<uint2*>(p) = u;
  }
}

template <class T>
__device__ __forceinline__ void copy4(T* dst, const T* src) {
  if constexpr (sizeof(T) == 4) {
    *reinterpret_cast<float4*>(dst) = *reinterpret_cast<const float4*>(src);
  } else {
    *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(src);
  }
}

// 8-byte global->shared copy (both addresses 8-byte aligned), through L1; zero-fill when invalid.
__device__ __forceinline__ void cp_async8(void* dst, const void* src, bool valid) {
  unsigned saddr = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  int src_bytes = valid ? 8 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(saddr), "l"(src), "r"(src_bytes));
}

template <int N, class T>
__device__ __forceinline__ void cp_async_elems(T* dst, const T* src, bool valid) {
  constexpr int BYTES = N * static_cast<int>(sizeof(T));
  static_assert(BYTES == 16 || BYTES == 8 || BYTES == 4 || BYTES == 2, "copies of 2, 4, 8 or 16 bytes");
  if constexpr (BYTES == 16) {
    cp_async16(reinterpret_cast<float*>(dst), reinterpret_cast<const float*>(src), valid);
  } else if constexpr (BYTES == 8) {
    cp_async8(dst, src, valid);
  } else if constexpr (BYTES == 4) {
    cp_async4(reinterpret_cast<float*>(dst), reinterpret_cast<const float*>(src), valid);
  } else {
    *reinterpret_cast<unsigned short*>(dst) = valid ? __ldg(reinterpret_cast<const unsigned short*>(src)) : 0;
  }
}

}  // namespace convtune
