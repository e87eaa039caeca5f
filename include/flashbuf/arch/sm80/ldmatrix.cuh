// arch/sm80: ldmatrix — four 8x8 16-bit matrices from shared memory into MMA fragments.
// Lane l supplies the address of row (l % 8) of matrix (l / 8) and receives, from each matrix,
// row l / 4, elements 2 * (l % 4) and +1 (the `.trans` form: column l / 4, rows 2*(l%4), +1).
// core/fragment.hpp holds the same map as host-testable constexpr functions.
#pragma once

#include <cstdint>

#include "flashbuf/arch/sm80/cp_async.cuh"

namespace flashbuf::sm80 {

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(smem_row)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(smem_row)));
}

}  // namespace flashbuf::sm80
