// arch/sm80: mad.wide.u32 — a 32 x 32 -> 64-bit multiply-add, for addresses built from 32-bit
// strides (IMAD.WIDE.U32; a 64-bit multiply of the same takes about four instructions).
#pragma once

#include <cstdint>

namespace flashbuf::sm80 {

__device__ __forceinline__ std::uint64_t mad_wide_u32(std::uint32_t a, std::uint32_t b, std::uint64_t c) {
  std::uint64_t d;
  asm("mad.wide.u32 %0, %1, %2, %3;" : "=l"(d) : "r"(a), "r"(b), "l"(c));
  return d;
}

}  // namespace flashbuf::sm80
