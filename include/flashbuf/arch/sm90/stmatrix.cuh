// arch/sm90: stmatrix — four 8x8 16-bit matrices from MMA accumulator fragments into shared
// memory, the mirror of ldmatrix: lane l supplies the address of row (l % 8) of matrix (l / 8)
// and gives, for each matrix, row l / 4, elements 2 * (l % 4) and +1 (one 32-bit register):
// the layout of an mma.sync / wgmma accumulator fragment after packing to 16 bits.
#pragma once

#include <cstdint>

#include "flashbuf/arch/sm80/cp_async.cuh"

namespace flashbuf::sm90 {

__device__ __forceinline__ void stmatrix_x4(void* smem_row, std::uint32_t r0, std::uint32_t r1, std::uint32_t r2,
                                            std::uint32_t r3) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(sm80::smem_u32(smem_row)),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
#endif
}

}  // namespace flashbuf::sm90
