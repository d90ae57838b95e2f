// Helpers of the wgmma kernels (sm_90a): shared addresses, cp.async copies, the async-proxy fence, wgmma's fence /
// commit / wait, the swizzled shared-memory layouts the matrix descriptors name, and the multistage main loop.
#pragma once
namespace convtune {

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ unsigned lds_u32(unsigned addr) {
  unsigned v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}

__device__ __forceinline__ void cp_async16_zfill(unsigned dst, const void* src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(ok ? 16 : 0));
}

// cp.async of BYTES = 4, 8 or 16 bytes, zero-filled when !ok (16: the L2-only .cg path; 4, 8: .ca, the only one).
template <int BYTES>
__device__ __forceinline__ void cp_async_zfill(unsigned dst, const void* src, bool ok) {
  if constexpr (BYTES == 16) {
    cp_async16_zfill(dst, src, ok);
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(src), "n"(BYTES),
                 "r"(ok ? BYTES : 0));
  }
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Byte offset of 16-byte piece j of row r in a K-major tile of CHB-byte rows with the CHB-byte swizzle (CUTLASS's
// Swizzle<3,4,3> / <2,4,3> / <1,4,3>: the piece index XORed with address bits 7.. of the row's start).
template <int CHB>
__device__ __forceinline__ unsigned swizzled_piece(int r, int j) {
  if constexpr (CHB == 128) {
    return static_cast<unsigned>(r * 128 + ((j ^ (r & 7)) << 4));
  } else if constexpr (CHB == 64) {
    return static_cast<unsigned>(r * 64 + ((j ^ ((r >> 1) & 3)) << 4));
  } else {
    return static_cast<unsigned>(r * 32 + ((j ^ ((r >> 2) & 1)) << 4));
  }
}

// Byte offset of byte b (a multiple of the copy size, within one 16-byte piece) of row r: swizzled_piece's rule.
template <int CHB>
__device__ __forceinline__ unsigned swizzled_byte(int r, int b) {
  return swizzled_piece<CHB>(r, b >> 4) + static_cast<unsigned>(b & 15);
}

// Matrix descriptor of a K-major tile of CHB-byte swizzled rows at `addr` (aligned to the 8-row group), advanced by
// k-step `ks` (32 bytes: 16 elements of 16 bits, 8 TF32 words): start >> 4, leading offset 16 B (unused by swizzled
// K-major layouts), stride offset 8*CHB bytes between 8-row groups, layout type 1 / 2 / 3 = 128 / 64 / 32-byte
// swizzle.
template <int CHB>
__device__ __forceinline__ unsigned long long swizzled_desc(unsigned addr, int ks) {
  constexpr unsigned long long layout = CHB == 128 ? 1ull : CHB == 64 ? 2ull : 3ull;
  const unsigned start = addr + ks * 32;
  return static_cast<unsigned long long>((start & 0x3FFFF) >> 4) | (1ull << 16) |
         (static_cast<unsigned long long>(CHB / 2) << 32) | (layout << 62);
}

// The multistage main loop of the wgmma kernels: the copies run STAGES - 2 chunks ahead, the tensor cores are given
// chunk it before the copies of chunk it + STAGES - 2 are issued (the copies' address arithmetic stays off the MMA's
// critical path), one wgmma group stays in flight across chunks. load(stage, chunk) issues one chunk's copies into a
// stage; mma(stage) issues its wgmmas (between fence and commit).
template <int STAGES, class Load, class Mma>
__device__ __forceinline__ void wgmma_pipeline(int nchunks, int chunk0, Load&& load, Mma&& mma) {
  static_assert(STAGES >= 3, "one stage computing, one in flight in the tensor cores, one loading");
#pragma unroll
  for (int s = 0; s < STAGES - 2; ++s) {
    if (s < nchunks) load(s, chunk0 + s);
    cp_async_commit();
  }
  for (int it = 0; it < nchunks; ++it) {
    cp_async_wait<STAGES - 3>();
    fence_proxy_async();  // the copies' words, read next by the tensor cores (async proxy)
    __syncthreads();      // all copies of chunk it landed; every warpgroup retired chunk it - 2 (stage reuse)
    wgmma_fence();
    mma(it % STAGES);
    wgmma_commit();
    {   // the stage of chunk it - 2, retired by every warpgroup before the barrier above
      const int next = it + STAGES - 2;
      if (next < nchunks) load(next % STAGES, chunk0 + next);
      cp_async_commit();
    }
    wgmma_wait<1>();
  }
  wgmma_wait<0>();
}

}  // namespace convtune
