// CPU backend: the vectorised online softmax (see online_softmax.hpp). Each entry point is
// compiled for several instruction sets (GCC target_clones: AVX-512, AVX2 + FMA, baseline)
// and the loader picks the best this CPU has, so the distributed build needs no -march.
// The loops keep their reductions in kSoftmaxLanes explicit partial results: the compiler
// may then vectorise them without -ffast-math, and NaN and infinity keep IEEE meaning.
// Built with -ffp-contract=off (CMakeLists.txt): the Kahan updates must not be fused.
#include "cpu/online_softmax.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "flashbuf/core/config.hpp"
#include "flashbuf/core/numeric.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FLASHBUF_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FLASHBUF_CPU_CLONES
#endif

namespace flashbuf::detail::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int L = kSoftmaxLanes;

// 2^y for y <= 0 (and NaN, which it returns): 2^y = 2^r · 2^f with r = round(y) and
// f in [-1/2, 1/2], 2^f from its Taylor series to degree 7 (truncation error below 1e-8
// relative, under half an fp32 ulp). Below -126 the result is flushed to 0: such a
// probability is under 2^-126 of the row's largest and cannot change an fp32 sum.
FLASHBUF_FORCEINLINE float exp2_nonpositive(float y) {
  constexpr float kMinExponent = -126.0f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 · 2^23: adding it rounds to an integer
  const float yc = y < kMinExponent ? kMinExponent : y;  // NaN compares false and stays
  const float r = (yc + kRoundMagic) - kRoundMagic;
  const float f = yc - r;
  // c_k = ln(2)^k / k!
  float p = 1.5252733804059841e-05f;
  p = p * f + 1.5403530393381610e-04f;
  p = p * f + 1.3333558146428443e-03f;
  p = p * f + 9.6181291076284772e-03f;
  p = p * f + 5.5504108664821580e-02f;
  p = p * f + 2.4022650695910071e-01f;
  p = p * f + 6.9314718055994531e-01f;
  p = p * f + 1.0f;
  const std::int32_t e = static_cast<std::int32_t>(r);  // exact: r is an integer in [-126, 0]
  std::uint32_t bits;
  std::memcpy(&bits, &p, sizeof bits);
  bits += static_cast<std::uint32_t>(e) << float32_fields::kMantissaBits;  // p · 2^r
  float out;
  std::memcpy(&out, &bits, sizeof out);
  out = y < kMinExponent ? 0.0f : out;
  return y != y ? y : out;
}

FLASHBUF_FORCEINLINE void store_p(float* p, int j, float value) { p[j] = value; }
// Round to nearest even, branch-free so the loop stays vectorised; P is never NaN unless the
// whole row is, and a NaN keeps its top bits plus the quiet bit.
FLASHBUF_FORCEINLINE void store_p(std::uint16_t* p, int j, float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const std::uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  const std::uint32_t nan = (bits >> 16) | 0x0040u;
  p[j] = static_cast<std::uint16_t>(value != value ? nan : rounded);
}

template <class P>
FLASHBUF_FORCEINLINE float online_softmax_row_impl(float* x, int width, int vb, int ve, ExponentScale beta,
                                                   RowSoftmax& row, P* p) {
  // Masked columns become -inf in place (the scores are scratch): both passes below then run
  // over whole vectors with no per-column test. Whatever a masked column held is gone.
  for (int j = 0; j < vb; ++j) x[j] = -kInf;
  for (int j = ve; j < width; ++j) x[j] = -kInf;

  // Pass 1: the tile's largest score, and whether a visible score is NaN (the max drops NaN:
  // x < NaN is false).
  float lane_max[L];
  std::int32_t lane_nan[L];
  for (int l = 0; l < L; ++l) {
    lane_max[l] = -kInf;
    lane_nan[l] = 0;
  }
  for (int j0 = 0; j0 < width; j0 += L) {
    for (int l = 0; l < L; ++l) {
      const float v = x[j0 + l];
      lane_max[l] = lane_max[l] < v ? v : lane_max[l];
      lane_nan[l] |= v != v;
    }
  }
  float tile_max = -kInf;
  std::int32_t tile_nan = 0;
  for (int l = 0; l < L; ++l) {
    tile_max = tile_max < lane_max[l] ? lane_max[l] : tile_max;
    tile_nan |= lane_nan[l];
  }

  const float old_max = row.max;
  float new_max = old_max;
  if (tile_nan) {
    new_max = std::numeric_limits<float>::quiet_NaN();
  } else if (tile_max > old_max) {
    new_max = tile_max;
  }
  if (new_max == -kInf) {  // nothing visible yet, here or before: P = 0, nothing to rescale
    for (int j = 0; j < width; ++j) store_p(p, j, 0.0f);
    return 1.0f;
  }
  // exp2(-inf) = 0 for a row's first visible tile; NaN stays NaN.
  const float rescale = old_max == new_max ? 1.0f : exp2_nonpositive((old_max - new_max) * beta.first * beta.second);

  // Pass 2: P and its sum. Masked columns: (-inf - max) · beta = -inf, exp2 = 0.
  float lane_sum[L];
  for (int l = 0; l < L; ++l) lane_sum[l] = 0.0f;
  const float b1 = beta.first, b2 = beta.second;
  for (int j0 = 0; j0 < width; j0 += L) {
    for (int l = 0; l < L; ++l) {
      const float e = exp2_nonpositive((x[j0 + l] - new_max) * b1 * b2);
      store_p(p, j0 + l, e);
      lane_sum[l] += e;
    }
  }
  float tile_sum = 0.0f;
  for (int l = 0; l < L; ++l) tile_sum += lane_sum[l];

  // sum = sum * rescale + tile_sum, compensated.
  const float scaled = row.sum * rescale;
  const float y = tile_sum - row.sum_compensation * rescale;
  const float t = scaled + y;
  row.sum_compensation = (t - scaled) - y;
  row.sum = t;
  row.max = new_max;
  return rescale;
}

}  // namespace

ExponentScale exponent_scale(double beta) {
  constexpr double kFloatMax = std::numeric_limits<float>::max();
  if (beta <= kFloatMax) return {static_cast<float>(beta)};
  const double root = std::sqrt(beta);  // beta < FLT_MAX * log2 e, so each factor fits
  return {static_cast<float>(root), static_cast<float>(beta / double(static_cast<float>(root)))};
}

FLASHBUF_CPU_CLONES float online_softmax_row(float* x, int width, int vb, int ve, ExponentScale beta, RowSoftmax& row,
                                             float* p) {
  return online_softmax_row_impl(x, width, vb, ve, beta, row, p);
}

FLASHBUF_CPU_CLONES float online_softmax_row(float* x, int width, int vb, int ve, ExponentScale beta, RowSoftmax& row,
                                             std::uint16_t* p) {
  return online_softmax_row_impl(x, width, vb, ve, beta, row, p);
}

FLASHBUF_CPU_CLONES void accumulate_tile(float* acc, float* comp, const float* tile, float rescale, int n) {
  if (rescale == 1.0f) {
    for (int d = 0; d < n; ++d) {
      const float y = tile[d] - comp[d];
      const float t = acc[d] + y;
      comp[d] = (t - acc[d]) - y;
      acc[d] = t;
    }
    return;
  }
  for (int d = 0; d < n; ++d) {
    const float a = acc[d] * rescale;
    const float y = tile[d] - comp[d] * rescale;
    const float t = a + y;
    comp[d] = (t - a) - y;
    acc[d] = t;
  }
}

FLASHBUF_CPU_CLONES bool any_non_finite(const float* x, int n) {
  // x - x is 0 for finite x and NaN for inf and NaN; the sum of those is NaN iff any was.
  float lanes[L] = {};
  int j = 0;
  for (; j + L <= n; j += L) {
    for (int l = 0; l < L; ++l) lanes[l] += x[j + l] - x[j + l];
  }
  float total = 0.0f;
  for (; j < n; ++j) total += x[j] - x[j];
  for (int l = 0; l < L; ++l) total += lanes[l];
  return total != 0.0f || total != total;
}

FLASHBUF_CPU_CLONES bool any_non_finite_bf16(const std::uint16_t* x, int n) {
  // Exponent bits all ones: inf or NaN.
  constexpr std::uint16_t kExp = 0x7F80u;
  std::uint16_t lanes[L] = {};
  int j = 0;
  for (; j + L <= n; j += L) {
    for (int l = 0; l < L; ++l) lanes[l] |= static_cast<std::uint16_t>((x[j + l] & kExp) == kExp);
  }
  bool any = false;
  for (; j < n; ++j) any = any || (x[j] & kExp) == kExp;
  for (int l = 0; l < L; ++l) any = any || lanes[l] != 0;
  return any;
}

}  // namespace flashbuf::detail::cpu
