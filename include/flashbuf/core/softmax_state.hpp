// Core layer: the online-softmax state of one query row and the merges built on it. Used
// by the CPU backend, by the kernels' softmax step (per row, per tile) and by the combine
// of split-KV / cascade / ring-attention partial results.
//
// Base 2: scores arrive pre-multiplied by softmax_scale * log2(e), so exp(scale * x)
// becomes exp2(s) (one MUFU.EX2 on NVIDIA). The state is
//     max = the largest score seen so far (-inf before any visible key),
//     sum = sum_i exp2(s_i - max)            (0 before any visible key).
// LSEs crossing the API are natural log: lse = ln(sum_i exp(scale x_i)) = (max + log2 sum) ln 2.
//
// -inf and NaN: a row may see no key (masking, empty split). Then max = -inf, sum = 0,
// lse = -inf and partial outputs are 0. Every place that would compute -inf - (-inf) = NaN
// checks for a -inf maximum first; exp2(-inf - finite) = 0 is fine and relied upon.
#pragma once

#include "flashbuf/core/config.hpp"
#include "flashbuf/core/numeric.hpp"

namespace flashbuf {

// Where a kernel's softmax step over a tile runs its caller's hook (OnlineSoftmax::update_scores;
// the Hopper consumer waits there for the previous tile's O += P V, so that what comes before
// the hook runs under that product):
//   between_row_halves  after the first of a thread's two rows is exponentiated and summed
//   after_scaling       once every row's max (and O's correction) is known and the scores are
//                       scaled and offset by their row's max, before the first exponential
enum class ScoresHook { between_row_halves, after_scaling };

struct SoftmaxState {
  float max = kNegInf;
  float sum = 0.0f;
};

// Folds n scores (base-2 scaled; -inf = masked) into `state`. Returns the factor that
// earlier accumulators (O = sum p_i v_i) must be multiplied by to stay relative to the new
// max: exp2(old_max - new_max), which is 0 when the row had seen nothing and 1 when the max
// did not move (or the row is still empty).
FLASHBUF_HOST_DEVICE inline float update(SoftmaxState& state, const float* scores, int n) {
  float new_max = state.max;
  for (int i = 0; i < n; ++i) new_max = math_max(new_max, scores[i]);
  if (new_max == kNegInf) return 1.0f;  // still no visible key: nothing to rescale
  const float rescale = math_exp2(state.max - new_max);  // exp2(-inf) = 0 for a fresh row
  float sum = state.sum * rescale;
  for (int i = 0; i < n; ++i) sum += math_exp2(scores[i] - new_max);
  state.max = new_max;
  state.sum = sum;
  return rescale;
}

// The state of the union of two disjoint key sets. Commutative; associative up to
// rounding. An empty side (max = -inf) returns the other side unchanged.
FLASHBUF_HOST_DEVICE inline SoftmaxState merge(const SoftmaxState& a, const SoftmaxState& b) {
  if (a.max == kNegInf) return b;
  if (b.max == kNegInf) return a;
  const float m = math_max(a.max, b.max);
  return {m, a.sum * math_exp2(a.max - m) + b.sum * math_exp2(b.max - m)};
}

// Base-2 log-sum-exp of the scores: max + log2(sum); -inf for an empty row.
FLASHBUF_HOST_DEVICE inline float lse_log2(const SoftmaxState& state) {
  if (state.max == kNegInf || state.sum <= 0.0f) return kNegInf;
  return state.max + math_log2(state.sum);
}

// Natural-log LSE (what the API returns): ln(sum_i exp(scale * x_i)); -inf for an empty row.
FLASHBUF_HOST_DEVICE inline float lse_natural(const SoftmaxState& state) {
  const float lse2 = lse_log2(state);
  return lse2 == kNegInf ? kNegInf : lse2 * kLn2;
}

// Combines two partial attention outputs over disjoint key sets, each normalised by its
// own softmax denominator and carrying its natural-log LSE:
//     o_out = (o_a e^lse_a + o_b e^lse_b) / (e^lse_a + e^lse_b),  lse_out = ln(e^lse_a + e^lse_b)
// computed relative to the larger LSE so nothing overflows. An empty side (lse = -inf) is
// ignored, its o never read; both empty: o_out = 0, lse_out = -inf. o_out may alias o_a or o_b. T is float (device) or double (tests).
template <class T>
FLASHBUF_HOST_DEVICE inline void merge_partials(const T* o_a, float lse_a, const T* o_b,
                                                float lse_b, int n, T* o_out,
                                                float& lse_out) {
  const float m = math_max(lse_a, lse_b);
  if (m == kNegInf) {
    for (int i = 0; i < n; ++i) o_out[i] = T(0);
    lse_out = kNegInf;
    return;
  }
  // An empty side's output is not read at all (0 * garbage could be NaN).
  if (lse_a == kNegInf || lse_b == kNegInf) {
    const T* live = lse_a == kNegInf ? o_b : o_a;
    for (int i = 0; i < n; ++i) o_out[i] = live[i];
    lse_out = m;
    return;
  }
  const float weight_a = math_exp2((lse_a - m) * kLog2e);  // in [0, 1]
  const float weight_b = math_exp2((lse_b - m) * kLog2e);
  const float total = weight_a + weight_b;  // >= 1: the larger side has weight 1
  const T scale_a = T(weight_a / total);
  const T scale_b = T(weight_b / total);
  for (int i = 0; i < n; ++i) o_out[i] = o_a[i] * scale_a + o_b[i] * scale_b;
  lse_out = m + math_log2(total) * kLn2;
}

// Attention sinks: a learned logit per query head joins each row's softmax denominator and
// adds no value. A sink is one more partial state with o = 0 and lse = sink, merged once per
// row (after every split has been merged, never once per split):
//     lse' = ln(e^lse + e^sink),   o' = o * e^(lse - lse')
// A row that saw no key (lse = -inf) gets o' = 0 and lse' = sink. A NaN lse stays NaN.
// Infinite sinks take the formula's limits: -inf adds nothing; +inf takes all the weight, so
// o' = 0 and lse' = +inf (where the formula's e^(sink - max(lse, sink)) is e^(inf - inf), NaN).
// A NaN sink is read by every row of its head: NaN o' and lse', with or without keys (the
// NaN rule). Returns the factor o is multiplied by; writes lse'. `sink` is natural-log, in the
// units of the scaled, soft-capped scores.
FLASHBUF_HOST_DEVICE inline float apply_sink(float lse, float sink, float& lse_out) {
  if (sink != sink) {
    lse_out = sink;
    return sink;
  }
  if (lse == kNegInf || (sink == kPosInf && lse == lse)) {
    lse_out = sink;
    return 0.0f;
  }
  const float m = math_max(lse, sink);
  const float weight_row = math_exp2((lse - m) * kLog2e);   // in [0, 1]
  const float weight_sink = math_exp2((sink - m) * kLog2e);
  const float total = weight_row + weight_sink;
  lse_out = m + math_log2(total) * kLn2;
  return weight_row / total;
}

// The same sink joined in a row's own scale, for kernels that keep the row's running max m
// (base 2: of the scores times log2 e) and its sum l of exp2(s - m), and divide by l anyway:
// the sink adds exp(sink - m') to the denominator, so o = acc / (l + sink_weight_log2(sink, m)).
// That is apply_sink's o, since o e^(lse - lse') = (acc / l) l / (l + e^(sink - m')) with
// lse = m' + ln l, at one exponential where forming lse and apply_sink take two logarithms, two
// exponentials and a division. A row that saw no key (m = -inf, l = 0) gets an infinite
// denominator, so o = 0; its LSE, and every LSE, comes from apply_sink. A sink of -inf weighs
// 0, also in a row without keys (where the exponent would be -inf + inf, NaN): that row's
// denominator stays 0, which the kernels' inverse maps to o = 0. A NaN sink weighs NaN.
FLASHBUF_HOST_DEVICE inline float sink_weight_log2(float sink, float max_log2) {
  return sink == kNegInf ? 0.0f : math_exp2(sink * kLog2e - max_log2);
}

}  // namespace flashbuf
