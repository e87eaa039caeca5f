// Host tests of core/numeric.hpp: bit-exact bf16/fp16 conversions (exhaustive round trips,
// round-to-nearest-even checked against a nearest-value property and, where the compiler
// has _Float16, against its conversions).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>

#include "flashbuf/core/numeric.hpp"

namespace flashbuf {
namespace {

constexpr int kAll16BitPatterns = 1 << 16;

bool bf16_is_nan(std::uint16_t b) { return (b & 0x7FFF) > 0x7F80; }
bool fp16_is_nan(std::uint16_t h) { return (h & 0x7FFF) > 0x7C00; }

// Compile-time checks double as a proof that the conversions are constexpr.
static_assert(float_to_bf16(1.0f) == 0x3F80);
static_assert(bf16_to_float(0xC000) == -2.0f);
static_assert(float_to_fp16(1.0f) == 0x3C00);
static_assert(fp16_to_float(0x0001) == 0x1p-24f);
static_assert(float_to_fp16(-0.0f) == 0x8000);

TEST(CoreNumeric, Bf16RoundTripsEveryPattern) {
  for (int i = 0; i < kAll16BitPatterns; ++i) {
    const auto b = static_cast<std::uint16_t>(i);
    const float f = bf16_to_float(b);
    if (bf16_is_nan(b)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << i;
      EXPECT_TRUE(bf16_is_nan(float_to_bf16(f))) << std::hex << i;
      EXPECT_EQ(float_to_bf16(f) & 0x8000, b & 0x8000) << "NaN sign kept, " << std::hex << i;
    } else {
      ASSERT_EQ(float_to_bf16(f), b) << std::hex << i;
    }
  }
}

TEST(CoreNumeric, Fp16RoundTripsEveryPattern) {
  for (int i = 0; i < kAll16BitPatterns; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    const float f = fp16_to_float(h);
    if (fp16_is_nan(h)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << i;
      EXPECT_TRUE(fp16_is_nan(float_to_fp16(f))) << std::hex << i;
    } else {
      ASSERT_EQ(float_to_fp16(f), h) << std::hex << i;
    }
  }
}

TEST(CoreNumeric, Fp16DecodesToTheIeeeValue) {
  // value = (-1)^s * 2^(e-15) * (1 + m/1024), subnormals 2^-14 * m/1024.
  for (int i = 0; i < kAll16BitPatterns; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    if (fp16_is_nan(h)) continue;
    const int sign = (h >> 15) ? -1 : 1;
    const int e = (h >> 10) & 0x1F;
    const int m = h & 0x3FF;
    double expected = 0;
    if (e == 0x1F) expected = HUGE_VAL;
    else if (e == 0) expected = std::ldexp(m, -24);
    else expected = std::ldexp(1024 + m, e - 25);
    ASSERT_EQ(static_cast<double>(fp16_to_float(h)), sign * expected) << std::hex << i;
  }
}

TEST(CoreNumeric, TiesRoundToEven) {
  // bf16 has 7 mantissa bits: ulp(1) = 2^-7.
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), 0x3F80);                 // tie, 0x3F80 even: down
  EXPECT_EQ(float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3F82);             // tie, 0x3F81 odd: up
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f + 0x1p-23f), 0x3F81);      // above the tie: up
  EXPECT_EQ(float_to_bf16(-(1.0f + 0x1p-8f)), 0xBF80);
  EXPECT_EQ(float_to_bf16(3.4028234663852886e38f), 0x7F80);          // FLT_MAX rounds to inf
  EXPECT_EQ(float_to_bf16(HUGE_VALF), 0x7F80);
  EXPECT_EQ(float_to_bf16(0x1p-149f), 0x0000);                       // float subnormal: 0

  // fp16 has 10 mantissa bits: ulp(1) = 2^-10.
  EXPECT_EQ(float_to_fp16(1.0f + 0x1p-11f), 0x3C00);                 // tie: down to even
  EXPECT_EQ(float_to_fp16(1.0f + 3 * 0x1p-11f), 0x3C02);             // tie: up to even
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7BFF);                        // largest finite
  EXPECT_EQ(float_to_fp16(65519.0f), 0x7BFF);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7C00);                        // tie with odd max: inf
  EXPECT_EQ(float_to_fp16(-1e10f), 0xFC00);
  EXPECT_EQ(float_to_fp16(0x1p-24f), 0x0001);                        // smallest subnormal
  EXPECT_EQ(float_to_fp16(0x1p-25f), 0x0000);                        // tie with 0: even (0)
  EXPECT_EQ(float_to_fp16(0x1p-25f * 1.0000001f), 0x0001);           // just above the tie
  EXPECT_EQ(float_to_fp16(3 * 0x1p-25f), 0x0002);                    // 1.5 ulp: tie, to 2
  EXPECT_EQ(float_to_fp16(0x1p-14f - 0x1p-25f), 0x0400);             // to the smallest normal
  EXPECT_EQ(float_to_fp16(-0x1p-26f), 0x8000);                       // signed zero kept
}

TEST(CoreNumeric, NanStaysNan) {
  const float quiet = __builtin_nanf("");
  const float signalling_low_payload = float_from_bits(0x7F800001u);  // payload below 16 bits
  EXPECT_TRUE(bf16_is_nan(float_to_bf16(quiet)));
  EXPECT_TRUE(bf16_is_nan(float_to_bf16(signalling_low_payload)));
  EXPECT_TRUE(bf16_is_nan(float_to_bf16(-signalling_low_payload)));
  EXPECT_TRUE(fp16_is_nan(float_to_fp16(quiet)));
  EXPECT_TRUE(fp16_is_nan(float_to_fp16(signalling_low_payload)));
}

// Random floats across every exponent: the conversion must return the representable value
// nearest to x (compared in double, exact for these magnitudes), ties to the even pattern.
template <class ToBits, class ToFloat>
void expect_nearest_even(std::uint16_t max_finite, ToBits to_bits, ToFloat to_float,
                         std::mt19937& rng) {
  std::uniform_int_distribution<std::uint32_t> any_bits;
  for (int trial = 0; trial < 200000; ++trial) {
    const float x = float_from_bits(any_bits(rng));
    if (std::isnan(x)) continue;
    const std::uint16_t b = to_bits(x);
    const std::uint16_t mag = b & 0x7FFF;
    const double xd = x;
    const double err = std::fabs(static_cast<double>(to_float(b)) - xd);
    // Neighbours towards zero and away from zero (same sign), when they are finite.
    for (int step : {-1, 1}) {
      const int n = mag + step;
      if (n < 0 || n > max_finite) continue;
      const auto nb = static_cast<std::uint16_t>((b & 0x8000) | n);
      const double nerr = std::fabs(static_cast<double>(to_float(nb)) - xd);
      if (std::isinf(err)) continue;  // overflow checked separately by hand-picked cases
      ASSERT_LE(err, nerr) << "x=" << x << " bits=" << std::hex << b;
      if (err == nerr) {
        ASSERT_EQ(b & 1, 0) << "tie must go to even, x=" << x;
      }
    }
  }
}

TEST(CoreNumeric, ConversionsPickTheNearestValue) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  expect_nearest_even(0x7F7F, [](float x) { return float_to_bf16(x); }, bf16_to_float, rng);
  expect_nearest_even(0x7BFF, [](float x) { return float_to_fp16(x); }, fp16_to_float, rng);
}

#if defined(__FLT16_MAX__)
// The compiler's own _Float16 conversion (IEEE, round to nearest even) as a second opinion.
TEST(CoreNumeric, Fp16MatchesCompilerFloat16) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::uint32_t> any_bits;
  for (int trial = 0; trial < 500000; ++trial) {
    const float x = float_from_bits(any_bits(rng));
    if (std::isnan(x)) continue;
    const auto reference = __builtin_bit_cast(std::uint16_t, static_cast<_Float16>(x));
    ASSERT_EQ(float_to_fp16(x), reference) << "x=" << x;
  }
  for (int i = 0; i < kAll16BitPatterns; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    if (fp16_is_nan(h)) continue;
    ASSERT_EQ(fp16_to_float(h), static_cast<float>(__builtin_bit_cast(_Float16, h)));
  }
}
#endif

TEST(CoreNumeric, Exp2AndLog2) {
  EXPECT_EQ(math_exp2(kNegInf), 0.0f);
  EXPECT_EQ(math_exp2(0.0f), 1.0f);
  EXPECT_EQ(math_exp2(10.0f), 1024.0f);
  EXPECT_EQ(math_log2(8.0f), 3.0f);
  EXPECT_EQ(math_log2(0.0f), kNegInf);
}

}  // namespace
}  // namespace flashbuf
