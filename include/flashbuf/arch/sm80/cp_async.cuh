// arch/sm80: cp.async — device memory to shared memory without register staging (sm80+).
// One PTX family per file; wrappers are named after the instruction they emit.
#pragma once

#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "flashbuf/arch/sm80/cp_async.cuh needs sm_80 or newer (cp.async)"
#endif

namespace flashbuf::sm80 {

__device__ __forceinline__ std::uint32_t smem_u32(const void* ptr) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(ptr));
}

// cp.async.cg.shared.global 16 bytes; src_bytes == 0 zero-fills the destination (used for
// rows past the end of a sequence so that 0 * garbage never makes a NaN).
__device__ __forceinline__ void cp_async_cg_16(void* smem_dst, const void* gmem_src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem_dst)),
               "l"(gmem_src), "r"(src_bytes));
}

// cp.async.ca.shared.global 4 bytes (one int32: a page-table entry), cached in L1.
__device__ __forceinline__ void cp_async_ca_4(void* smem_dst, const void* gmem_src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_u32(smem_dst)), "l"(gmem_src));
}

__device__ __forceinline__ void cp_async_commit_group() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most `Pending` committed groups are still in flight.
template <int Pending>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

// Waits until every cp.async this thread issued has landed, committed in a group or not.
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

}  // namespace flashbuf::sm80
