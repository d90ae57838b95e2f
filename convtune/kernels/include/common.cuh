// Shared device helpers for convtune kernels: cp.async staging with zero-fill, written as inline PTX
// so that NVRTC needs no CUDA headers (the CUTLASS cp_async_zfill pattern).
#pragma once

namespace convtune {

// 4-byte global->shared copy; when `valid` is false the destination is zero-filled and `src` is not read
// (src-size 0), but it must still be a valid address.
__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool valid) {
  unsigned saddr = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  int src_bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(saddr), "l"(src), "r"(src_bytes));
}

// 16-byte global->shared copy (both addresses 16-byte aligned), bypassing L1; zero-fill when invalid.
__device__ __forceinline__ void cp_async16(float* dst, const float* src, bool valid) {
  unsigned saddr = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(saddr), "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

}  // namespace convtune
