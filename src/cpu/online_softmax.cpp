// CPU backend: the vectorised online softmax (see online_softmax.hpp). Each entry point is
// compiled for several instruction sets (GCC target_clones: AVX-512, AVX2 + FMA, baseline)
// and the loader picks the best this CPU has, so the distributed build needs no -march.
// The loops are written on 16-lane vectors (GCC/Clang vector extensions) with their
// reductions kept per lane: vector code without -ffast-math, and NaN and infinity keep IEEE
// meaning.
// The compensated (Kahan) updates live in compensated.cpp, built without multiply-add
// contraction; here the compiler may fuse the polynomial's multiply-adds.
#include "cpu/online_softmax.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "cpu/target_clones.hpp"
#include "flashbuf/core/config.hpp"
#include "flashbuf/core/numeric.hpp"

namespace flashbuf::detail::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int L = kSoftmaxLanes;

// Sixteen lanes as one GCC/Clang vector: each target clone lowers it to what it has (one zmm,
// two ymm, four xmm), so the arithmetic is written once and is vector code on every target.
using FloatVec = float __attribute__((vector_size(L * sizeof(float))));
using IntVec = std::int32_t __attribute__((vector_size(L * sizeof(float))));
using UintVec = std::uint32_t __attribute__((vector_size(L * sizeof(float))));
using HalfVec = std::uint16_t __attribute__((vector_size(L * sizeof(std::uint16_t))));

FLASHBUF_FORCEINLINE FloatVec splat(float x) { return FloatVec{} + x; }
FLASHBUF_FORCEINLINE FloatVec load(const float* p) {
  FloatVec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
FLASHBUF_FORCEINLINE void store(float* p, FloatVec v) { std::memcpy(p, &v, sizeof v); }
// Round to nearest even; a NaN keeps its top bits plus the quiet bit (as float_to_bf16).
FLASHBUF_FORCEINLINE void store(std::uint16_t* p, FloatVec v) {
  const UintVec bits = reinterpret_cast<UintVec>(v);
  const UintVec rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  const UintVec nan = (bits >> 16) | 0x0040u;
  const HalfVec out = __builtin_convertvector(v != v ? nan : rounded, HalfVec);
  std::memcpy(p, &out, sizeof out);
}

// 2^y for y <= 0 (and NaN, which it returns): 2^y = 2^r · 2^f with r = round(y) and
// f in [-1/2, 1/2], 2^f from its Taylor series to degree 7 (truncation error below 1e-8
// relative, under half an fp32 ulp). Below -126 the result is flushed to 0: such a
// probability is under 2^-126 of the row's largest and cannot change an fp32 sum.
FLASHBUF_FORCEINLINE FloatVec exp2_nonpositive(FloatVec y) {
  const FloatVec min_exponent = splat(-126.0f);
  const FloatVec round_magic = splat(12582912.0f);  // 1.5 · 2^23: adding it rounds to an integer
  const FloatVec yc = y < min_exponent ? min_exponent : y;  // NaN compares false and stays
  const FloatVec r = (yc + round_magic) - round_magic;
  const FloatVec f = yc - r;
  // c_k = ln(2)^k / k!
  FloatVec p = splat(1.5252733804059841e-05f);
  p = p * f + 1.5403530393381610e-04f;
  p = p * f + 1.3333558146428443e-03f;
  p = p * f + 9.6181291076284772e-03f;
  p = p * f + 5.5504108664821580e-02f;
  p = p * f + 2.4022650695910071e-01f;
  p = p * f + 6.9314718055994531e-01f;
  p = p * f + 1.0f;
  const IntVec e = __builtin_convertvector(r, IntVec);  // exact: r is an integer in [-126, 0]
  const UintVec bits = reinterpret_cast<UintVec>(p) + (reinterpret_cast<UintVec>(e) << float32_fields::kMantissaBits);
  FloatVec out = reinterpret_cast<FloatVec>(bits);  // p · 2^r
  out = y < min_exponent ? splat(0.0f) : out;
  return y != y ? y : out;
}

FLASHBUF_FORCEINLINE float exp2_nonpositive(float y) { return exp2_nonpositive(splat(y))[0]; }

template <class P>
FLASHBUF_FORCEINLINE float online_softmax_row_impl(float* x, int width, int vb, int ve, ExponentScale beta,
                                                   RowSoftmax& row, P* p) {
  // Masked columns become -inf in place (the scores are scratch): both passes below then run
  // over whole vectors with no per-column test. Whatever a masked column held is gone.
  for (int j = 0; j < vb; ++j) x[j] = -kInf;
  for (int j = ve; j < width; ++j) x[j] = -kInf;

  // Pass 1: the tile's largest score. NaN drops out here (v < NaN and NaN < v are false);
  // it is caught by the sum of pass 2, whose terms it makes NaN.
  FloatVec lane_max = splat(-kInf);
  for (int j = 0; j < width; j += L) {
    const FloatVec v = load(x + j);
    lane_max = lane_max < v ? v : lane_max;
  }
  float tile_max = -kInf;
  for (int l = 0; l < L; ++l) tile_max = tile_max < lane_max[l] ? lane_max[l] : tile_max;

  const float old_max = row.max;
  const float new_max = tile_max > old_max ? tile_max : old_max;  // a NaN old max stays
  if (new_max == -kInf) {
    // Nothing finite visible yet, here or before. Either no key at all (P = 0, nothing to
    // rescale), or only NaN scores: then the row is NaN from here on.
    bool nan = false;
    for (int j = 0; j < width; ++j) nan = nan || x[j] != x[j];
    const float fill = nan ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
    for (int j = 0; j < width; j += L) store(p + j, splat(fill));
    if (nan) row = {fill, fill, 0.0f};
    return nan ? fill : 1.0f;
  }
  // exp2(-inf) = 0 for a row's first visible tile; NaN stays NaN.
  const float rescale = old_max == new_max ? 1.0f : exp2_nonpositive((old_max - new_max) * beta.first * beta.second);

  // Pass 2: P and its sum. Masked columns: (-inf - max) · beta = -inf, exp2 = 0.
  FloatVec lane_sum = splat(0.0f);
  const FloatVec m = splat(new_max), b1 = splat(beta.first), b2 = splat(beta.second);
  for (int j = 0; j < width; j += L) {
    const FloatVec e = exp2_nonpositive((load(x + j) - m) * b1 * b2);
    store(p + j, e);
    lane_sum += e;
  }
  float tile_sum = 0.0f;
  for (int l = 0; l < L; ++l) tile_sum += lane_sum[l];
  // A NaN score made its p, and so the sum, NaN: the row's max becomes NaN, which keeps every
  // later tile of the row NaN too (its P·V row is NaN already: NaN · v = NaN).
  const float kept_max = tile_sum != tile_sum ? tile_sum : new_max;

  compensated_fold(row.sum, row.sum_compensation, tile_sum, rescale);
  row.max = kept_max;
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
