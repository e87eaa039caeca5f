// Core layer: bit-exact 16-bit float conversions on uint16_t storage (bf16 and IEEE fp16,
// round-to-nearest-even, NaN kept NaN) and the exp2/log2 the online softmax uses. The CPU
// backend stores bf16/fp16 tensors as uint16_t and converts with these; device code has
// hardware conversions but these serve as its bit-exact reference in tests.
#pragma once

#include <cstdint>

#include "flashbuf/core/config.hpp"

#if defined(_MSC_VER) && !defined(__CUDA_ARCH__)
#include <cmath>  // MSVC has no __builtin_exp2f/__builtin_log2f
#endif

namespace flashbuf {

// Reinterpreting float bits. __builtin_bit_cast is what std::bit_cast is built on; calling
// it directly keeps the conversions constexpr AND callable from device code (std::bit_cast
// is a host-only function to nvcc without --expt-relaxed-constexpr).
FLASHBUF_HOST_DEVICE constexpr std::uint32_t float_bits(float x) {
  return __builtin_bit_cast(std::uint32_t, x);
}
FLASHBUF_HOST_DEVICE constexpr float float_from_bits(std::uint32_t bits) {
  return __builtin_bit_cast(float, bits);
}

namespace float32_fields {
inline constexpr std::uint32_t kSignMask = 0x8000'0000u;
inline constexpr std::uint32_t kAbsMask = 0x7FFF'FFFFu;
inline constexpr std::uint32_t kExpMask = 0x7F80'0000u;  // also the bits of +inf
inline constexpr std::uint32_t kMantissaMask = 0x007F'FFFFu;
inline constexpr std::uint32_t kImplicitOne = 0x0080'0000u;
inline constexpr int kMantissaBits = 23;
inline constexpr int kExpBias = 127;
}  // namespace float32_fields

// ---------------------------------------------------------------------------------------
// bf16: the upper 16 bits of a float (1 sign, 8 exponent, 7 mantissa bits).
// ---------------------------------------------------------------------------------------
namespace bf16_fields {
inline constexpr int kShift = 16;                    // bf16 = float bits >> 16
inline constexpr std::uint32_t kQuietBit = 0x0040u;  // top mantissa bit of a bf16
inline constexpr std::uint32_t kHalfUlpMinusOne = 0x7FFFu;
}  // namespace bf16_fields

FLASHBUF_HOST_DEVICE constexpr float bf16_to_float(std::uint16_t bits) {
  return float_from_bits(static_cast<std::uint32_t>(bits) << bf16_fields::kShift);
}

FLASHBUF_HOST_DEVICE constexpr std::uint16_t float_to_bf16(float x) {
  using namespace float32_fields;
  const std::uint32_t bits = float_bits(x);
  if ((bits & kAbsMask) > kExpMask) {
    // NaN: truncating could clear every mantissa bit left (turning NaN into inf), so keep
    // the sign and top payload bits and force the quiet bit.
    return static_cast<std::uint16_t>((bits >> bf16_fields::kShift) | bf16_fields::kQuietBit);
  }
  // Round to nearest, ties to even: add just under half an ulp, plus one more when the kept
  // part is odd, then truncate. A carry out of the mantissa correctly bumps the exponent
  // (and the largest finites round to inf, as IEEE requires).
  const std::uint32_t keep_lsb = (bits >> bf16_fields::kShift) & 1u;
  return static_cast<std::uint16_t>((bits + bf16_fields::kHalfUlpMinusOne + keep_lsb) >>
                                    bf16_fields::kShift);
}

// ---------------------------------------------------------------------------------------
// fp16 (IEEE binary16): 1 sign, 5 exponent, 10 mantissa bits, subnormals below 2^-14.
// ---------------------------------------------------------------------------------------
namespace fp16_fields {
inline constexpr std::uint32_t kSignMask = 0x8000u;
inline constexpr std::uint32_t kExpMask = 0x7C00u;  // also the bits of +inf
inline constexpr std::uint32_t kMantissaMask = 0x03FFu;
inline constexpr std::uint32_t kQuietBit = 0x0200u;
inline constexpr int kMantissaBits = 10;
inline constexpr int kExpBias = 15;
inline constexpr int kSignShift = 16;  // fp16 sign bit = float sign bit >> 16
// Mantissa bits a float has beyond an fp16 mantissa.
inline constexpr int kDroppedBits = float32_fields::kMantissaBits - kMantissaBits;  // 13
// Float biased exponents at the fp16 boundaries.
inline constexpr std::uint32_t kFloatExpOfMinNormal =
    float32_fields::kExpBias - kExpBias + 1;  // 113: 2^-14
inline constexpr std::uint32_t kFloatExpOfOverflow =
    float32_fields::kExpBias + kExpBias + 1;  // 143: 2^16, rounds to inf
// Below 2^-25 (float exponent 102) a value is under half the smallest subnormal: 0.
inline constexpr std::uint32_t kFloatExpOfHalfMinSubnormal =
    float32_fields::kExpBias - kExpBias - kMantissaBits;  // 102
}  // namespace fp16_fields

FLASHBUF_HOST_DEVICE constexpr float fp16_to_float(std::uint16_t h) {
  using namespace fp16_fields;
  const std::uint32_t sign = (static_cast<std::uint32_t>(h) & kSignMask) << kSignShift;
  const std::uint32_t exp = (h & kExpMask) >> kMantissaBits;
  std::uint32_t mant = h & kMantissaMask;
  constexpr std::uint32_t kMaxExp = kExpMask >> kMantissaBits;  // 31: inf / NaN
  constexpr std::uint32_t kRebias = float32_fields::kExpBias - kExpBias;  // 112
  if (exp == kMaxExp) {
    // inf stays inf; a NaN's payload moves up with the mantissa, so it stays NaN.
    return float_from_bits(sign | float32_fields::kExpMask | (mant << kDroppedBits));
  }
  if (exp == 0) {
    if (mant == 0) return float_from_bits(sign);  // signed zero
    // Subnormal mant * 2^-24: normalise so the leading one becomes the implicit bit.
    std::uint32_t float_exp = kRebias + 1;
    while ((mant & (kMantissaMask + 1)) == 0) {
      mant <<= 1;
      --float_exp;
    }
    mant &= kMantissaMask;
    return float_from_bits(sign | (float_exp << float32_fields::kMantissaBits) |
                           (mant << kDroppedBits));
  }
  return float_from_bits(sign | ((exp + kRebias) << float32_fields::kMantissaBits) |
                         (mant << kDroppedBits));
}

FLASHBUF_HOST_DEVICE constexpr std::uint16_t float_to_fp16(float x) {
  using namespace fp16_fields;
  const std::uint32_t bits = float_bits(x);
  const std::uint32_t sign = (bits >> kSignShift) & kSignMask;
  const std::uint32_t abs = bits & float32_fields::kAbsMask;
  const std::uint32_t float_exp = abs >> float32_fields::kMantissaBits;

  if (abs > float32_fields::kExpMask) {  // NaN: keep the top payload bits, force quiet
    return static_cast<std::uint16_t>(sign | kExpMask | kQuietBit |
                                      ((abs & float32_fields::kMantissaMask) >> kDroppedBits));
  }
  if (float_exp >= kFloatExpOfOverflow) {  // >= 2^16 (inf included): inf
    return static_cast<std::uint16_t>(sign | kExpMask);
  }

  // Everything else: keep the top bits of the (implicit-one) mantissa, then round to
  // nearest even on the dropped bits. A rounding carry ripples into the exponent, which is
  // also how 65520 and up become inf and the largest subnormal becomes the smallest normal.
  std::uint32_t kept = 0;
  std::uint32_t dropped = 0;
  int dropped_bits = 0;
  if (float_exp >= kFloatExpOfMinNormal) {
    dropped_bits = kDroppedBits;
    kept = ((float_exp - float32_fields::kExpBias + kExpBias) << kMantissaBits) |
           ((abs & float32_fields::kMantissaMask) >> kDroppedBits);
    dropped = abs & ((1u << kDroppedBits) - 1u);
  } else {
    if (float_exp < kFloatExpOfHalfMinSubnormal) return static_cast<std::uint16_t>(sign);
    // Subnormal result: value = significand * 2^(float_exp - 150); in units of the fp16
    // subnormal step 2^-24 that is significand >> (126 - float_exp).
    const std::uint32_t significand =
        (abs & float32_fields::kMantissaMask) | float32_fields::kImplicitOne;
    dropped_bits = static_cast<int>(kFloatExpOfMinNormal + kDroppedBits - float_exp);
    kept = significand >> dropped_bits;
    dropped = significand & ((1u << dropped_bits) - 1u);
  }
  const std::uint32_t half_ulp = 1u << (dropped_bits - 1);
  if (dropped > half_ulp || (dropped == half_ulp && (kept & 1u))) ++kept;
  return static_cast<std::uint16_t>(sign | kept);
}

// ---------------------------------------------------------------------------------------
// exp2 / log2 on host and device (not constexpr: they are library calls on the host and
// SFU-backed intrinsics on the device). No <cmath> in device code.
// ---------------------------------------------------------------------------------------
FLASHBUF_HOST_DEVICE FLASHBUF_FORCEINLINE float math_exp2(float x) {
#if defined(__CUDA_ARCH__)
  return exp2f(x);
#elif defined(_MSC_VER)
  return std::exp2(x);
#else
  return __builtin_exp2f(x);
#endif
}

FLASHBUF_HOST_DEVICE FLASHBUF_FORCEINLINE float math_log2(float x) {
#if defined(__CUDA_ARCH__)
  return log2f(x);
#elif defined(_MSC_VER)
  return std::log2(x);
#else
  return __builtin_log2f(x);
#endif
}

FLASHBUF_HOST_DEVICE constexpr float math_max(float a, float b) { return a > b ? a : b; }

FLASHBUF_HOST_DEVICE constexpr bool is_nan(float x) { return x != x; }

}  // namespace flashbuf
