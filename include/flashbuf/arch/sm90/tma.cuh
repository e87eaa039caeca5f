// arch/sm90: the bulk tensor copy engine (TMA) — one thread asks for a whole box of a tensor
// (described by a CUtensorMap made on the host) to be written into shared memory, swizzled as
// the map says; completion is counted in bytes on an mbarrier (expect_tx). Rows or columns
// outside the tensor arrive as zeros; the store form writes a box back. Needs sm_90.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "flashbuf/arch/sm80/cp_async.cuh"
#include "flashbuf/arch/sm90/mbarrier.cuh"  // mbarrier_arrive_expect_tx: the count its copies complete
#include "flashbuf/arch/sm90/target.cuh"

namespace flashbuf::sm90 {

// cp.async.bulk.tensor.4d global -> shared: the box at coordinates (c0 innermost .. c3).
__device__ __forceinline__ void cp_async_bulk_tensor_4d_g2s(void* smem_dst, const CUtensorMap* map, int c0, int c1,
                                                            int c2, int c3, std::uint64_t* bar) {
#ifndef FLASHBUF_NO_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(sm80::smem_u32(smem_dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(sm80::smem_u32(bar))
      : "memory");
#endif
}

// cp.async.bulk.tensor.4d shared -> global: the box at coordinates (c0 innermost .. c3) from
// shared memory laid out (and swizzled) as the map says; rows or columns outside the tensor
// are not written. Completion is tracked per thread in bulk groups (commit, then wait).
__device__ __forceinline__ void cp_async_bulk_tensor_4d_s2g(const CUtensorMap* map, int c0, int c1, int c2, int c3,
                                                            const void* smem_src) {
#ifndef FLASHBUF_NO_WGMMA
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%1, %2, %3, %4}], [%5];\n" ::"l"(
                   reinterpret_cast<std::uint64_t>(map)),
               "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(sm80::smem_u32(smem_src))
               : "memory");
#endif
}

__device__ __forceinline__ void cp_async_bulk_commit_group() {
#ifndef FLASHBUF_NO_WGMMA
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most N of this thread's bulk groups still read shared memory (their global
// writes may still be in flight): the source may then be reused, or the block may exit.
template <int N>
__device__ __forceinline__ void cp_async_bulk_wait_group_read() {
#ifndef FLASHBUF_NO_WGMMA
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
#endif
}

}  // namespace flashbuf::sm90
