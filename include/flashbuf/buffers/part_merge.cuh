// buffers: the merge of partial softmax states over disjoint keys, the device form of
// core/softmax_state.hpp's merge and merge_partials (on the MUFU), for every device
// merge: decode's merge of the warps that split a block's keys, its in-cluster merge of the
// splits (over lane groups: merge_lane_group), and the combine kernel (merge_states, and
// decode's split-KV combine).
//
// A part is a log-scale l (its running max, whose row sum travels beside it, or its LSE, whose
// sum is 1): base 2 in the kernels, natural log (NaturalLog) where LSEs cross the API, as in
// the combine kernel. Relative to the largest l over the parts, part i weighs exp(l_i - max)
// (exp2 in base 2); the merged output is sum_i weight_i o_i / sum and its LSE max + log(sum),
// with sum = sum_i weight_i (times each part's row sum where the parts are not normalised).
// The edge cases are core's:
// - a part that saw no key (l = -inf) weighs 0 (its output is 0, or never read);
// - no part saw a key: the reference is 0, not -inf (no -inf - -inf), every weight 0, so the
//   output is 0 and the LSE -inf;
// - a NaN part: fmaxf skips it in the max, and its NaN weight or sum carries into the output
//   and the LSE (the combine kernel tests for it first, as the merge_states contract asks).
#pragma once

#include "flashbuf/arch/sm80/fast_math.cuh"
#include "flashbuf/core/config.hpp"

namespace flashbuf {

template <bool NaturalLog = false>
struct PartMerge {
  float max = kNegInf;  // the largest log-scale over the parts; -inf: none saw a key

  __device__ __forceinline__ void add(float l) { max = fmaxf(max, l); }
  __device__ __forceinline__ float reference() const { return max == kNegInf ? 0.0f : max; }
  // A part's weight relative to the reference: in [0, 1], 0 for a part that saw no key. The
  // difference is taken in the parts' own units, so a large finite max cannot overflow.
  __device__ __forceinline__ float weight(float l) const {
    const float d = l - reference();
    return sm80::ex2_approx_ftz(NaturalLog ? d * kLog2e : d);
  }
  // What the weighted sum of outputs is multiplied by: 1 / sum, or 0 when no part saw a key.
  // A sum is 0, >= 1 (the part at the max weighs exp2(0), its row sum or LSE sum >= 1), +inf
  // or NaN, where the one-instruction reciprocal and log2 need none of the IEEE division's or
  // __log2f's range fix-ups (OutputRegisterBuffer::inverse_denominator, OnlineSoftmax::row_lse).
  __device__ __forceinline__ static float inverse(float sum) { return sum == 0.0f ? 0.0f : sm80::rcp_approx_ftz(sum); }
  // The merged LSE, in the parts' units: -inf when no part saw a key.
  __device__ __forceinline__ float lse(float sum) const {
    const float log2_sum = sm80::lg2_approx_ftz(sum);
    return sum == 0.0f ? kNegInf : max + (NaturalLog ? log2_sum * kLn2 : log2_sum);
  }
};

// The merge of one piece's parts held one per lane by a group of g adjacent lanes (g a power of
// two dividing the warp; decode's cluster merges): lane j holds part j's base-2 log-scale l and
// its 8 outputs o, normalised (each part's sum is 1 in its own scale, so the merged sum is the
// sum of the weights); lanes past the parts hold l = -inf and o = 0. Every lane of the group
// ends with the merged, normalised outputs in o and returns the merged log-scale. Every lane of
// the warp calls it (the shuffles).
__device__ __forceinline__ float merge_lane_group(int g, float l, float (&o)[8]) {
  PartMerge<> parts{l};
  for (int m = 1; m < g; m <<= 1) parts.add(__shfl_xor_sync(0xffffffffu, parts.max, m));
  const float f = parts.weight(l);
#pragma unroll
  for (int e = 0; e < 8; ++e) o[e] = f * o[e];
  float sum = f;
  for (int m = 1; m < g; m <<= 1) {
    sum += __shfl_xor_sync(0xffffffffu, sum, m);
#pragma unroll
    for (int e = 0; e < 8; ++e) o[e] += __shfl_xor_sync(0xffffffffu, o[e], m);
  }
  const float inv = PartMerge<>::inverse(sum);
#pragma unroll
  for (int e = 0; e < 8; ++e) o[e] *= inv;
  return parts.lse(sum);
}

}  // namespace flashbuf
