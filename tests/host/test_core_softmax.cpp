// Host tests of core/softmax_state.hpp: the online state equals a one-pass float64
// softmax, merges are commutative and associative (to rounding) over random splits, the
// rescale factor keeps running outputs exact, and empty rows never produce NaN.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "flashbuf/core/softmax_state.hpp"

namespace flashbuf {
namespace {

constexpr double kLn2d = 0.69314718055994530942;

struct Seeded {
  unsigned seed = std::random_device{}();
  std::mt19937 rng{seed};
  std::string trace() const { return "seed=" + std::to_string(seed); }
};

// Natural-log LSE, in double, of base-2 scores s_i (= ln terms s_i * ln 2).
double reference_lse(const std::vector<float>& s) {
  double m = -HUGE_VAL;
  for (float x : s) m = std::max(m, static_cast<double>(x));
  if (m == -HUGE_VAL) return -HUGE_VAL;
  double sum = 0;
  for (float x : s) sum += std::exp2(static_cast<double>(x) - m);
  return (m + std::log2(sum)) * kLn2d;
}

std::vector<float> random_scores(std::mt19937& rng, int n, double masked_fraction) {
  std::normal_distribution<float> score(0.0f, 8.0f);  // wide: exercises max changes
  std::bernoulli_distribution masked(masked_fraction);
  std::vector<float> s(n);
  for (float& x : s) x = masked(rng) ? kNegInf : score(rng);
  return s;
}

SoftmaxState state_of(const float* s, int n) {
  SoftmaxState st;
  update(st, s, n);
  return st;
}

TEST(CoreSoftmax, OnePassMatchesFloat64Reference) {
  Seeded g;
  SCOPED_TRACE(g.trace());
  for (int trial = 0; trial < 200; ++trial) {
    const int n = std::uniform_int_distribution<int>(1, 400)(g.rng);
    const auto s = random_scores(g.rng, n, 0.2);
    const double ref = reference_lse(s);
    const float lse = lse_natural(state_of(s.data(), n));
    if (std::isinf(ref)) {
      EXPECT_EQ(lse, kNegInf);
    } else {
      EXPECT_NEAR(lse, ref, 1e-5 * std::max(1.0, std::fabs(ref))) << "n=" << n;
    }
  }
}

// Random cut points, each chunk folded by update() then the chunk states merged, versus
// one sequential pass: same LSE; and the running output O kept with update()'s rescale
// factor equals the float64 softmax-weighted sum.
TEST(CoreSoftmax, ChunkedUpdatesAndMergesAgree) {
  Seeded g;
  SCOPED_TRACE(g.trace());
  std::normal_distribution<float> value(0.0f, 1.0f);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = std::uniform_int_distribution<int>(1, 300)(g.rng);
    const auto s = random_scores(g.rng, n, 0.3);
    std::vector<float> v(n);
    for (float& x : v) x = value(g.rng);

    SoftmaxState running, merged;
    double out_running = 0;  // un-normalised O, relative to running.max
    for (int begin = 0; begin < n;) {
      const int len = std::uniform_int_distribution<int>(1, 40)(g.rng);
      const int end = std::min(n, begin + len);
      const float rescale = update(running, s.data() + begin, end - begin);
      ASSERT_FALSE(std::isnan(rescale));
      out_running *= rescale;
      if (running.max != kNegInf)
        for (int i = begin; i < end; ++i) out_running += std::exp2(s[i] - running.max) * v[i];
      merged = merge(merged, state_of(s.data() + begin, end - begin));
      begin = end;
    }
    const double ref = reference_lse(s);
    if (std::isinf(ref)) {
      EXPECT_EQ(lse_natural(running), kNegInf);
      EXPECT_EQ(lse_natural(merged), kNegInf);
      EXPECT_EQ(out_running, 0.0);
      continue;
    }
    const double tol = 1e-5 * std::max(1.0, std::fabs(ref));
    EXPECT_NEAR(lse_natural(running), ref, tol);
    EXPECT_NEAR(lse_natural(merged), ref, tol);

    double ref_out = 0;
    for (int i = 0; i < n; ++i) ref_out += std::exp(s[i] * kLn2d - ref) * v[i];
    EXPECT_NEAR(out_running / running.sum, ref_out, 1e-5);
  }
}

TEST(CoreSoftmax, MergeIsCommutativeAndAssociative) {
  Seeded g;
  SCOPED_TRACE(g.trace());
  for (int trial = 0; trial < 500; ++trial) {
    SoftmaxState parts[3];
    for (auto& p : parts) {
      const int n = std::uniform_int_distribution<int>(0, 50)(g.rng);
      const auto s = random_scores(g.rng, n, 0.25);
      p = state_of(s.data(), n);
    }
    const auto& [a, b, c] = parts;
    const SoftmaxState ab = merge(a, b), ba = merge(b, a);
    EXPECT_EQ(ab.max, ba.max);
    EXPECT_EQ(ab.sum, ba.sum);
    const SoftmaxState left = merge(ab, c), right = merge(a, merge(b, c));
    EXPECT_EQ(left.max, right.max);
    const float l = lse_natural(left), r = lse_natural(right);
    if (l == kNegInf) {
      EXPECT_EQ(r, kNegInf);
    } else {
      EXPECT_NEAR(l, r, 1e-5f * std::max(1.0f, std::fabs(l)));
    }
  }
}

TEST(CoreSoftmax, EmptyRowsAreMinusInfinityNotNan) {
  const SoftmaxState empty;
  EXPECT_EQ(empty.max, kNegInf);
  EXPECT_EQ(empty.sum, 0.0f);
  EXPECT_EQ(lse_natural(empty), kNegInf);
  EXPECT_EQ(lse_log2(empty), kNegInf);

  SoftmaxState st;
  const float masked[4] = {kNegInf, kNegInf, kNegInf, kNegInf};
  EXPECT_EQ(update(st, masked, 4), 1.0f);  // nothing to rescale
  EXPECT_EQ(update(st, masked, 0), 1.0f);
  EXPECT_EQ(st.max, kNegInf);
  EXPECT_EQ(st.sum, 0.0f);
  EXPECT_EQ(lse_natural(merge(st, st)), kNegInf);
  EXPECT_FALSE(std::isnan(merge(st, st).sum));

  // First visible key after masked ones: earlier accumulators (all zero) get factor 0.
  const float some[3] = {kNegInf, 2.0f, kNegInf};
  EXPECT_EQ(update(st, some, 3), 0.0f);
  EXPECT_EQ(st.max, 2.0f);
  EXPECT_EQ(st.sum, 1.0f);
  EXPECT_FLOAT_EQ(lse_natural(st), 2.0f * kLn2);
  // A fully masked chunk later leaves the state and the accumulators alone.
  EXPECT_EQ(update(st, masked, 4), 1.0f);
  EXPECT_EQ(st.sum, 1.0f);

  // Merging with an empty state returns the other side bit for bit.
  const SoftmaxState x{3.5f, 7.25f};
  EXPECT_EQ(merge(x, empty).max, x.max);
  EXPECT_EQ(merge(x, empty).sum, x.sum);
  EXPECT_EQ(merge(empty, x).sum, x.sum);
}

// Partial outputs over two disjoint key sets, each normalised with its own LSE, merge into
// the output over the union (checked against float64 for T = float and T = double).
template <class T>
void check_merge_partials(std::mt19937& rng) {
  constexpr int kDim = 24;
  std::normal_distribution<double> value(0.0, 1.0);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = std::uniform_int_distribution<int>(2, 200)(rng);
    const int cut = std::uniform_int_distribution<int>(0, n)(rng);
    const auto s = random_scores(rng, n, 0.3);
    std::vector<double> v(static_cast<size_t>(n) * kDim);
    for (double& x : v) x = value(rng);

    auto partial = [&](int begin, int end, std::vector<T>& o, float& lse) {
      const std::vector<float> part(s.begin() + begin, s.begin() + end);
      const double ref = reference_lse(part);
      lse = static_cast<float>(ref);
      o.assign(kDim, T(0));
      if (std::isinf(ref)) return;
      for (int i = begin; i < end; ++i)
        for (int d = 0; d < kDim; ++d)
          o[d] += static_cast<T>(std::exp(s[i] * kLn2d - ref) * v[i * kDim + d]);
    };
    std::vector<T> oa, ob, ofull;
    float la, lb, lfull;
    partial(0, cut, oa, la);
    partial(cut, n, ob, lb);
    partial(0, n, ofull, lfull);

    std::vector<T> out(kDim);
    float lse_out = 0;
    merge_partials(oa.data(), la, ob.data(), lb, kDim, out.data(), lse_out);
    if (std::isinf(lfull)) {
      EXPECT_EQ(lse_out, kNegInf);
      for (T x : out) EXPECT_EQ(x, T(0));
      continue;
    }
    EXPECT_NEAR(lse_out, lfull, 1e-5 * std::max(1.0f, std::fabs(lfull)));
    for (int d = 0; d < kDim; ++d) EXPECT_NEAR(out[d], ofull[d], 2e-5) << d;
    // In place (o_out aliases o_a) gives the same result.
    merge_partials(oa.data(), la, ob.data(), lb, kDim, oa.data(), lse_out);
    for (int d = 0; d < kDim; ++d) EXPECT_EQ(oa[d], out[d]);
  }
}

// Infinite sinks take the formula's limits in both forms, where the formula itself would give
// e^(inf - inf): -inf adds nothing (also to a row without keys), +inf takes all the weight
// (o = 0, lse = +inf). A NaN LSE stays NaN, and a NaN sink makes both NaN.
TEST(CoreSoftmax, InfiniteSinksTakeTheFormulasLimits) {
  const float nan = __builtin_nanf("");
  float lse = 0.0f;
  EXPECT_EQ(apply_sink(2.5f, kPosInf, lse), 0.0f);
  EXPECT_EQ(lse, kPosInf);
  EXPECT_EQ(apply_sink(kNegInf, kPosInf, lse), 0.0f);
  EXPECT_EQ(lse, kPosInf);
  EXPECT_EQ(apply_sink(2.5f, kNegInf, lse), 1.0f);
  EXPECT_EQ(lse, 2.5f);
  EXPECT_EQ(apply_sink(kNegInf, kNegInf, lse), 0.0f);
  EXPECT_EQ(lse, kNegInf);
  apply_sink(nan, kPosInf, lse);
  EXPECT_TRUE(std::isnan(lse));
  // A NaN sink: NaN o and lse, in rows with and without keys (the NaN rule).
  for (float row_lse : {2.5f, kNegInf, kPosInf}) {
    EXPECT_TRUE(std::isnan(apply_sink(row_lse, nan, lse))) << row_lse;
    EXPECT_TRUE(std::isnan(lse)) << row_lse;
  }
  // In the row's scale (base-2 max m): the sink's term, for a row with keys and one without.
  for (float max_log2 : {3.0f, kNegInf}) {
    EXPECT_EQ(sink_weight_log2(kNegInf, max_log2), 0.0f) << max_log2;
    EXPECT_EQ(sink_weight_log2(kPosInf, max_log2), kPosInf) << max_log2;
    EXPECT_TRUE(std::isnan(sink_weight_log2(nan, max_log2))) << max_log2;
  }
}

// The sink in the row's own scale (sink_weight_log2) gives apply_sink's o: a row's scores in
// base 2 with its max m and sum l, sinks from far below to far above the scores, against the
// float64 softmax with the sink as one more term; a row with no key comes out as 0.
TEST(CoreSoftmax, SinkInTheRowsScaleMatchesApplySink) {
  Seeded g;
  SCOPED_TRACE(g.trace());
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<float> s = random_scores(g.rng, 1 + trial % 37, trial % 3 == 0 ? 0.5 : 0.0);
    const float sink = -40.0f + 0.4f * static_cast<float>(trial);  // natural log
    std::vector<float> v(s.size());
    for (float& x : v) x = value(g.rng);
    const SoftmaxState st = state_of(s.data(), static_cast<int>(s.size()));
    float acc = 0.0f;  // sum of exp2(s - m) v, as a kernel's O accumulator holds it
    double ref_num = 0.0, ref_den = std::exp(static_cast<double>(sink));
    for (size_t j = 0; j < s.size(); ++j) {
      if (s[j] == kNegInf) continue;
      acc += math_exp2(s[j] - st.max) * v[j];
      const double w = std::exp2(static_cast<double>(s[j]));
      ref_num += w * v[j];
      ref_den += w;
    }
    const float o = acc / (st.sum + sink_weight_log2(sink, st.max));
    const double ref = ref_num / ref_den;
    EXPECT_NEAR(o, ref, 1e-5 * std::max(1.0, std::fabs(ref))) << "trial " << trial;
    float lse = 0.0f;
    const float factor = apply_sink(st.max == kNegInf ? kNegInf : (st.max + std::log2(st.sum)) * kLn2, sink, lse);
    if (st.sum > 0.0f) EXPECT_NEAR(o, acc / st.sum * factor, 1e-5 * std::max(1.0f, std::fabs(o))) << "trial " << trial;
    if (st.max == kNegInf) EXPECT_EQ(o, 0.0f);
  }
}

TEST(CoreSoftmax, MergePartialsMatchesTheFullOutput) {
  Seeded g;
  SCOPED_TRACE(g.trace());
  check_merge_partials<float>(g.rng);
  check_merge_partials<double>(g.rng);
}

TEST(CoreSoftmax, MergePartialsEdgeCases) {
  const float nan = __builtin_nanf("");
  const float garbage[2] = {nan, 1e30f};
  const float live[2] = {0.5f, -2.0f};
  float out[2];
  float lse = 0;
  // Both empty: zeros and -inf, even when the inputs hold garbage.
  merge_partials(garbage, kNegInf, garbage, kNegInf, 2, out, lse);
  EXPECT_EQ(lse, kNegInf);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
  // One side empty: the other passes through exactly and its garbage is never read.
  merge_partials(garbage, kNegInf, live, 1.25f, 2, out, lse);
  EXPECT_EQ(lse, 1.25f);
  EXPECT_EQ(out[0], live[0]);
  EXPECT_EQ(out[1], live[1]);
  merge_partials(live, -3.0f, garbage, kNegInf, 2, out, lse);
  EXPECT_EQ(lse, -3.0f);
  EXPECT_EQ(out[1], live[1]);
  // Far-apart LSEs: no overflow, the small side vanishes.
  merge_partials(live, 1000.0f, live, -1000.0f, 2, out, lse);
  EXPECT_FLOAT_EQ(lse, 1000.0f);
  EXPECT_FLOAT_EQ(out[0], live[0]);
  // Equal LSEs: the average, and lse + ln 2.
  const float other[2] = {1.5f, 0.0f};
  merge_partials(live, 4.0f, other, 4.0f, 2, out, lse);
  EXPECT_FLOAT_EQ(out[0], 1.0f);
  EXPECT_FLOAT_EQ(out[1], -1.0f);
  EXPECT_FLOAT_EQ(lse, 4.0f + kLn2);
}

}  // namespace
}  // namespace flashbuf
