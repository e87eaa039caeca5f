// Core layer, bottom-most header: the host/device function markers and the few numeric
// constants every other layer shares. Included by every core header; no CUDA headers, so
// it compiles with any C++20 compiler on the host and with nvcc in device code.
#pragma once

#include <type_traits>
#include <utility>

#if defined(__CUDACC__)
#define FLASHBUF_HOST_DEVICE __host__ __device__
#define FLASHBUF_FORCEINLINE __forceinline__
#elif defined(_MSC_VER)
#define FLASHBUF_HOST_DEVICE
#define FLASHBUF_FORCEINLINE __forceinline
#else
#define FLASHBUF_HOST_DEVICE
#define FLASHBUF_FORCEINLINE inline __attribute__((always_inline))
#endif

namespace flashbuf {

// log2(e) and ln(2), computed once: scores are pre-scaled by softmax_scale * kLog2e so the
// softmax can use exp2 (one SFU instruction on NVIDIA); kLn2 converts base-2 LSEs back to
// natural log at the API boundary.
inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

// std::numeric_limits<float>::infinity() is a host function (unusable in device code
// without --expt-relaxed-constexpr); the builtin is a constant expression on every
// compiler we support, nvcc included.
inline constexpr float kPosInf = __builtin_huge_valf();
inline constexpr float kNegInf = -__builtin_huge_valf();

// ceil(a / b) for non-negative a and positive b.
template <class Int>
FLASHBUF_HOST_DEVICE constexpr Int ceil_div(Int a, Int b) {
  static_assert(std::is_integral_v<Int>, "ceil_div takes integers");
  return (a + b - 1) / b;
}

// f(std::integral_constant<int, i>{}) for i = 0 .. N - 1, unrolled: i is a constant
// expression in f (a template argument, e.g. an MMA k-step).
template <int N, class F>
FLASHBUF_HOST_DEVICE FLASHBUF_FORCEINLINE void static_for(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) {
    (f(std::integral_constant<int, I>{}), ...);
  }(std::make_integer_sequence<int, N>{});
}

// floor(a / b) for any a and positive b (integer division rounds toward zero).
FLASHBUF_HOST_DEVICE constexpr int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// The smallest multiple of `multiple` that is >= a (non-negative a, positive multiple).
template <class Int>
FLASHBUF_HOST_DEVICE constexpr Int round_up(Int a, Int multiple) {
  static_assert(std::is_integral_v<Int>, "round_up takes integers");
  return ceil_div(a, multiple) * multiple;
}

// True when x is a power of two (x > 0).
template <class Int>
FLASHBUF_HOST_DEVICE constexpr bool is_pow2(Int x) {
  static_assert(std::is_integral_v<Int>, "is_pow2 takes integers");
  return x > 0 && (x & (x - 1)) == 0;
}

// log2 of a power of two (the bit index of its single set bit); used to turn byte widths
// into swizzle bit positions at compile time.
template <class Int>
FLASHBUF_HOST_DEVICE constexpr int log2_pow2(Int x) {
  static_assert(std::is_integral_v<Int>, "log2_pow2 takes integers");
  int bit = 0;
  while (x > 1) {
    x >>= 1;
    ++bit;
  }
  return bit;
}

}  // namespace flashbuf
