// Kernels layer: the combine of partial attention results (merge_states). Each part is an
// output normalised over its own keys plus its natural-log LSE; the merged row is
//     M = max_s lse_s,   w_s = exp(lse_s - M) / sum_s' exp(lse_s' - M),
//     o = sum_s w_s o_s, lse = M + ln sum_s exp(lse_s - M).
// A part with lse = -inf is skipped without reading its o (it may be garbage: an empty
// split never needs to write it); a row whose parts are all empty gives o = 0, lse = -inf.
// A part with a NaN LSE (it read a NaN) makes the row NaN: o = NaN, lse = NaN. Parts with
// lse = +inf (an overflowed denominator) share all the weight equally and lse = +inf (the
// rule of flashbuf.hpp's merge_states; inf - inf would give NaN).
//
// Sinks (decode only; merge_states has none): after the parts are merged, the head's sink
// joins the row once (apply_sink in core/softmax_state.hpp): one factor on the weights and
// the LSE with the sink; a row with no part gets o = 0, lse = sink. Merging parts computed
// without sinks and then applying the sink is what attention with sinks over all the keys
// is, so merge_states stays sink-free and a caller who merges adds the sink after.
//
// One warp per (token, head) row; each lane owns kVec consecutive channels per step of
// 32 * kVec. Parts are read 8 at a time (independent loads in flight before the first use).
// The public merge_states and the decode's split-KV combine are this one kernel: decode
// only adds a two-level token index (token = b * q_per_seq + i, with separate batch and
// token strides for o and lse) and programmatic dependent launch after the decode grid.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "flashbuf/core/config.hpp"
#include "flashbuf/core/softmax_state.hpp"
#include "flashbuf/arch/sm90/griddepcontrol.cuh"
#include "flashbuf/buffers/part_merge.cuh"

namespace flashbuf::kernels::combine {

struct CombineParams {
  int num_parts = 0;
  int tokens = 0;        // rows = tokens * heads
  int tokens_inner = 1;  // token t -> (t / tokens_inner, t % tokens_inner) for o and lse
  int heads = 0;
  int head_dim_v = 0;
  const void* o_parts = nullptr;
  std::int64_t op_part_stride = 0, op_token_stride = 0, op_head_stride = 0;
  const float* lse_parts = nullptr;
  std::int64_t lp_part_stride = 0, lp_token_stride = 0, lp_head_stride = 0;
  void* o = nullptr;
  std::int64_t o_outer_stride = 0, o_inner_stride = 0, o_head_stride = 0;
  float* lse = nullptr;  // optional
  std::int64_t lse_outer_stride = 0, lse_inner_stride = 0, lse_head_stride = 0;
  const float* sinks = nullptr;  // optional: sinks[h], natural log, joined once per row
};

inline constexpr int kWarpsPerBlock = 4;
inline constexpr int kThreads = 32 * kWarpsPerBlock;
inline constexpr int kPartsInFlight = 8;  // loads issued together per lane

template <class T>
__device__ __forceinline__ float to_float(T x) {
  if constexpr (std::is_same_v<T, float>) return x;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(x);
  else return __half2float(x);
}
template <class T>
__device__ __forceinline__ T from_float(float x) {
  if constexpr (std::is_same_v<T, float>) return x;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(x);
  else return __float2half_rn(x);
}

// kVec consecutive elements as one access (16 bytes of fp32 or 8 bytes of 16-bit types for
// kVec = 4; callers guarantee the alignment).
template <class T, int kVec>
struct alignas(sizeof(T) * kVec) Vec {
  T v[kVec];
};

template <class T, int kVec>
__device__ __forceinline__ void load_vec(const T* src, float (&out)[kVec]) {
  const Vec<T, kVec> x = *reinterpret_cast<const Vec<T, kVec>*>(src);
#pragma unroll
  for (int e = 0; e < kVec; ++e) out[e] = to_float(x.v[e]);
}
template <class T, int kVec>
__device__ __forceinline__ void store_vec(T* dst, const float (&in)[kVec]) {
  Vec<T, kVec> x;
#pragma unroll
  for (int e = 0; e < kVec; ++e) x.v[e] = from_float<T>(in[e]);
  *reinterpret_cast<Vec<T, kVec>*>(dst) = x;
}

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, m));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) x += __shfl_xor_sync(0xffffffffu, x, m);
  return x;
}

template <class TIn, class TOut, int kVec>
__global__ void __launch_bounds__(kThreads, 4) combine_kernel(const __grid_constant__ CombineParams p) {
  // After a decode grid launched us early (programmatic dependent launch), wait for its
  // partial results; a no-op for a plain launch.
  sm90::griddepcontrol_wait();

  const int lane = threadIdx.x & 31;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (row >= static_cast<std::int64_t>(p.tokens) * p.heads) return;  // warp-uniform
  const int t = static_cast<int>(row / p.heads);
  const int h = static_cast<int>(row - static_cast<std::int64_t>(t) * p.heads);
  const int n = p.num_parts;
  const float* const lse_row = p.lse_parts + t * p.lp_token_stride + h * p.lp_head_stride;
  const TIn* const o_row = static_cast<const TIn*>(p.o_parts) + t * p.op_token_stride + h * p.op_head_stride;
  const int t_outer = t / p.tokens_inner;
  const int t_inner = t - t_outer * p.tokens_inner;
  TOut* const out = static_cast<TOut*>(p.o) + t_outer * p.o_outer_stride + t_inner * p.o_inner_stride +
                    h * p.o_head_stride;

  float* const lse_out = p.lse != nullptr ? p.lse + t_outer * p.lse_outer_stride + t_inner * p.lse_inner_stride +
                                                 h * p.lse_head_stride
                                           : nullptr;
  const float sink = p.sinks != nullptr ? p.sinks[h] : kNegInf;  // a sink of -inf adds nothing

  // Pass 1: the largest LSE (lanes over parts), and whether any part is NaN (fmaxf skips NaN).
  float mx = kNegInf;
  bool nan_part = false;
  for (int s = lane; s < n; s += 32) {
    const float l = lse_row[s * p.lp_part_stride];
    mx = fmaxf(mx, l);
    nan_part |= l != l;
  }
  mx = warp_max(mx);
  const bool nan_row = __any_sync(0xffffffffu, nan_part) || sink != sink;  // a NaN sink: the NaN rule
  if (nan_row || !(mx > kNegInf)) {
    // A NaN part: O = NaN, LSE = NaN. Every part empty: O = 0, LSE = -inf (the sink with sinks).
    float fill[kVec];
#pragma unroll
    for (int e = 0; e < kVec; ++e) fill[e] = nan_row ? __int_as_float(0x7fffffff) : 0.0f;
    for (int d = lane * kVec; d < p.head_dim_v; d += 32 * kVec) store_vec<TOut, kVec>(out + d, fill);
    if (lse_out != nullptr && lane == 0) *lse_out = nan_row ? fill[0] : sink;
    return;
  }
  // The parts' weights (buffers/part_merge.cuh), except with mx = +inf: the +inf parts get
  // weight 1, the rest 0, and a sink (finite) adds nothing next to them. Warp-uniform: mx is
  // the same in every lane.
  const bool infinite = mx == kPosInf;
  const PartMerge<true> merge{mx};
  auto weight = [&](float l) { return infinite ? (l == kPosInf ? 1.0f : 0.0f) : merge.weight(l); };
  // Pass 2: the denominator.
  float sum = 0.0f;
  for (int s = lane; s < n; s += 32) sum += weight(lse_row[s * p.lp_part_stride]);
  sum = warp_sum(sum);
  float inv_sum = merge.inverse(sum);  // >= 1 term equals 1, so sum >= 1
  float lse = infinite ? kPosInf : merge.lse(sum);
  if (p.sinks != nullptr && !infinite) inv_sum *= apply_sink(lse, sink, lse);

  // Pass 3: o = sum_s w_s o_s; lane k of each group of 32 parts holds w for part k.
  for (int base = 0; base < p.head_dim_v; base += 32 * kVec) {
    const int d = base + lane * kVec;
    const bool active = d < p.head_dim_v;
    float acc[kVec];
#pragma unroll
    for (int e = 0; e < kVec; ++e) acc[e] = 0.0f;
    for (int s0 = 0; s0 < n; s0 += 32) {
      const float w_mine = s0 + lane < n ? weight(lse_row[(s0 + lane) * p.lp_part_stride]) * inv_sum : 0.0f;
      const int count = min(32, n - s0);
      for (int k = 0; k < count; k += kPartsInFlight) {
        float w[kPartsInFlight];
        float x[kPartsInFlight][kVec];
#pragma unroll
        for (int u = 0; u < kPartsInFlight; ++u) {
          w[u] = __shfl_sync(0xffffffffu, w_mine, (k + u) & 31);
          if (k + u >= count) w[u] = 0.0f;
#pragma unroll
          for (int e = 0; e < kVec; ++e) x[u][e] = 0.0f;
          if (w[u] > 0.0f && active) load_vec<TIn, kVec>(o_row + (s0 + k + u) * p.op_part_stride + d, x[u]);
        }
#pragma unroll
        for (int u = 0; u < kPartsInFlight; ++u) {
#pragma unroll
          for (int e = 0; e < kVec; ++e) acc[e] += w[u] * x[u][e];
        }
      }
    }
    if (active) store_vec<TOut, kVec>(out + d, acc);
  }
  if (lse_out != nullptr && lane == 0) *lse_out = lse;
}

}  // namespace flashbuf::kernels::combine
