// arch/sm80: mma.sync.aligned.m16n8k16.row.col with fp32 accumulation (sm80+; runs on sm90).
// Fragment ownership (which lane holds which element) lives in core/fragment.hpp.
#pragma once

#include <cstdint>
#include <type_traits>

namespace flashbuf::sm80 {

struct Bf16Tag {};
struct Fp16Tag {};

// D = A * B + D; A 16x16 (4 x b32 of packed halves), B 16x8 (2 x b32), C/D 16x8 fp32.
template <class Tag>
__device__ __forceinline__ void mma_m16n8k16_f32(float (&d)[4], const std::uint32_t (&a)[4],
                                                 std::uint32_t b0, std::uint32_t b1) {
  if constexpr (std::is_same_v<Tag, Bf16Tag>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

}  // namespace flashbuf::sm80
