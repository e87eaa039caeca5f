// arch/sm80: ld.shared as volatile asm — a shared-memory read that stays in program order with
// the other volatile asm around it (cp.async), so reads written before a run of copies are
// issued before the first of them and their latencies overlap (a plain read is sunk to its use).
#pragma once

#include <cstdint>

#include "flashbuf/arch/sm80/cp_async.cuh"

namespace flashbuf::sm80 {

__device__ __forceinline__ std::uint32_t ld_shared_ordered_u32(const void* ptr) {
  std::uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(smem_u32(ptr)));
  return v;
}

}  // namespace flashbuf::sm80
