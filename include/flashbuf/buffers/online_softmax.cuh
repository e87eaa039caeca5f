// buffers: the online softmax (base 2) over the m16n8 accumulator fragments of the register
// buffers (register_buffers.cuh), the device form of core/softmax_state.hpp's math, shared by
// the prefill kernels (mma.sync and wgmma: each warp's accumulators lie alike) and decode.
// The end of a block's rows, where the kernel's outputs are written, is the kernels'
// (finalize_rows in kernels/prefill_common.cuh, decode's epilogue). Row ownership: lane l
// holds rows l/4 ("lo") and l/4 + 8 ("hi") of each of its m16 tiles, columns 2*(l%4), +1 of
// each n8 tile; a quad's lanes share a row.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "flashbuf/arch/sm80/fast_math.cuh"
#include "flashbuf/core/config.hpp"
#include "flashbuf/core/fragment.hpp"
#include "flashbuf/core/mask.hpp"
#include "flashbuf/core/softmax_state.hpp"

namespace flashbuf {

// Row reductions over the four lanes of a quad (they share a row of the accumulator).
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Pairwise reduction of a register array: ceil(log2(N)) dependent steps, not N (Nsight
// Compute showed fixed-latency dependency stalls as the top stall reason). Each step folds the
// elements past the largest power of two below N onto the front (N / 2 of them when N is a
// power of two; N = 10 for the Hopper kernel's 80-key tiles).
template <int N, class Op>
__device__ __forceinline__ float tree_reduce(float (&x)[N], Op op) {
  if constexpr (N == 1) {
    return x[0];
  } else {
    constexpr int kHalf = [] {
      int h = 1;
      while (2 * h < N) h *= 2;
      return h;
    }();
    // Halving by recursion, not by a `stride /= 2` loop, which nvcc does not unroll (the
    // array then went to local memory).
#pragma unroll
    for (int i = 0; i < N - kHalf; ++i) x[i] = op(x[i], x[i + kHalf]);
    return tree_reduce(reinterpret_cast<float(&)[kHalf]>(x), op);
  }
}

// A hook that does nothing (OnlineSoftmax::update_scores' default).
struct NoHook {
  __device__ void operator()(float) const {}
};

// The online softmax (base 2) of one thread's rows: MTiles m16 tiles x 2 rows each, over
// score accumulators s[MTiles][NTiles][4], rescaling an OutputRegisterBuffer.
// MaxSlackLog2 > 0: a row keeps the max it has unless a tile's exceeds it by more than
// MaxSlackLog2 (base 2), so P may reach 2^MaxSlackLog2 and the factor is exactly 1 on almost
// every tile after the first; the caller then skips O's rescale where no row of the warp moved
// (any_moved). P, the sums and O are all relative to the same kept max. But a row's largest P
// is then no longer exactly 1: P V takes it rounded to PIn (the 16-bit input type), the float
// sum does not, and a nearly one-hot row's O would carry that rounding on top of its own
// (PrefillGpu.NearlyOneHotRowsUnderAKeptMax). So each thread also sums, over its largest P of
// each tile, (P as rounded to PIn) - P, and O's denominator adds it: the dominant term is then
// the same in O's numerator and denominator, as with the max itself for a base. The LSE keeps
// the float sum alone.
template <int MTiles, int NTiles, int MaxSlackLog2 = 0, class PIn = float>
struct OnlineSoftmax {
  // Each row's running max, already times scale_log2 (rounded: see update_scores), and the
  // thread's partial sums (quad-reduced in finalize()); with a kept max, the rounding of the
  // thread's largest P of each tile, summed (o_denominator).
  float row_max_log2[MTiles][2];
  float row_sum[MTiles][2];
  float top_rounding[MTiles][2];

  __device__ void init() {
#pragma unroll
    for (int mt = 0; mt < MTiles; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        row_max_log2[mt][h] = kNegInf;
        row_sum[mt][h] = 0.0f;
        top_rounding[mt][h] = 0.0f;
      }
  }

  // softcap: scores become tanh(s * scale / softcap); the softcap factor is in scale_log2.
  __device__ static void apply_softcap(float (&s)[MTiles][NTiles][4], float softcap_inv) {
#pragma unroll
    for (int mt = 0; mt < MTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < NTiles; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) s[mt][nt][i] = tanhf(s[mt][nt][i] * softcap_inv);
  }

  // Scores the mask hides become -inf; q_row0 is the first query row of this warp's tiles.
  // Each of a thread's rows sees one interval of keys (key_range of that row alone), so the
  // per-element test is two compares, not visible()'s bounds and window arithmetic; without a
  // left window bound every row's keys begin at 0 and one compare does (causal masks: the
  // diagonal tiles' masking is a share of D 64's ALU work).
  __device__ static void apply_mask(float (&s)[MTiles][NTiles][4], const MaskParams& mask, int q_row0,
                                    int key0) {
    if (mask.has_left_bound()) {
      apply_key_interval<true>(s, mask, q_row0, key0);
    } else {
      apply_key_interval<false>(s, mask, q_row0, key0);
    }
  }
  // The thread's element (nt, j) of a row lies in column c0 + 8 nt + j (c0 = c_coord(lane, 0).col),
  // so each test compares a per-row bound with an immediate: one ISETP per bound and element,
  // where comparing the column itself first built it in a register (a LOP3 each).
  template <bool kLeftBound>
  __device__ static void apply_key_interval(float (&s)[MTiles][NTiles][4], const MaskParams& mask, int q_row0,
                                            int key0) {
    const int lane = threadIdx.x % 32;
    const int c0 = mma_m16n8k16::c_coord(lane, 0).col;
#pragma unroll
    for (int mt = 0; mt < MTiles; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int q = q_row0 + mt * 16 + mma_m16n8k16::c_coord(lane, 2 * h).row;
        const KeyRange seen = key_range(mask, q, q + 1);  // {0, 0} for rows past seqlen_q
        const int lo = seen.begin - key0 - c0, hi = seen.end - key0 - c0;  // relative to c0
#pragma unroll
        for (int nt = 0; nt < NTiles; ++nt)
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const int k = nt * 8 + j;  // column - c0
            if ((kLeftBound && k < lo) || k >= hi) s[mt][nt][2 * h + j] = kNegInf;
          }
      }
  }
  // The same test for rows whose keys the caller bounds itself (decode: a packed row's token
  // and its split): row h of m-tile mt sees keys [lo[mt][h], hi[mt][h]); key0 is the tile's
  // first. (Not one helper shared with apply_key_interval: that changed the code nvcc makes
  // for a prefill kernel.)
  __device__ static void apply_key_bounds(float (&s)[MTiles][NTiles][4], const int (&lo)[MTiles][2],
                                          const int (&hi)[MTiles][2], int key0) {
    const int c0 = mma_m16n8k16::c_coord(threadIdx.x % 32, 0).col;
#pragma unroll
    for (int mt = 0; mt < MTiles; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int first = lo[mt][h] - key0 - c0, end = hi[mt][h] - key0 - c0;  // relative to c0
#pragma unroll
        for (int nt = 0; nt < NTiles; ++nt)
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const int k = nt * 8 + j;  // column - c0
            if (k < first || k >= end) s[mt][nt][2 * h + j] = kNegInf;
          }
      }
  }

  // Exponentiates s in place (it becomes P) and returns per row the factor exp2(m_old - m_new)
  // the output must be scaled by (the caller may do it later, once O is not in flight). A row
  // that has seen no visible key keeps max = -inf; its exponent base is taken as 0 so
  // exp2(-inf - base) = 0, not NaN.
  // The max is kept times scale_log2, each product rounded (__fmul_rn: no FMA contraction), so
  // where a row's max did not move the factor's exponent is exactly 0 and the factor exactly 1.
  // Contracted (row_max * scale_log2 - base as one FMA), the unrounded product left base's
  // rounding residue: O and the row sum took 1 +- 2^-24 on every such tile, including tiles
  // wholly masked for the row (the persistent grid's 128-row items walk some that a 64-row
  // block skips; bf16 O then differed in the last bit). Scaling is monotonic, so the max of
  // the scaled values is the scaled max.
  // `between(correction of the first row)` runs once, where `At` says (core/softmax_state.hpp's
  // ScoresHook: a kernel's hook that ends a scheduling block there and waits for a product,
  // prefill_sm90.cuh's steady tile); with after_scaling, EarlyExpTiles of m tile 0's n tiles are
  // exponentiated before it. The order of the steps moves with them; every element's arithmetic
  // is the same either way (the same bits).
  template <ScoresHook At = ScoresHook::between_row_halves, int EarlyExpTiles = 0, class Between = NoHook>
  __device__ void update_scores(float (&s)[MTiles][NTiles][4], float scale_log2,
                                float (&correction)[MTiles][2], Between between = {}) {
    static_assert(EarlyExpTiles == 0 || At == ScoresHook::after_scaling,
                  "online_softmax: exponentials before the hook follow the scaling");
    static_assert(EarlyExpTiles >= 0 && EarlyExpTiles <= NTiles);
    if constexpr (At == ScoresHook::between_row_halves) {
#pragma unroll
      for (int mt = 0; mt < MTiles; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (mt == 0 && h == 1) between(correction[0][0]);
          float tile_max;
          const float base = max_step(s, mt, h, scale_log2, correction, tile_max);
          exp_step(s, mt, h, scale_log2, base, tile_max, correction);
        }
      }
    } else {
      float base[MTiles][2], tile_max[MTiles][2];
#pragma unroll
      for (int mt = 0; mt < MTiles; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) base[mt][h] = max_step(s, mt, h, scale_log2, correction, tile_max[mt][h]);
#pragma unroll
      for (int mt = 0; mt < MTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < NTiles; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) s[mt][nt][i] = s[mt][nt][i] * scale_log2 - base[mt][i / 2];
      // The scores of m tile 0's first EarlyExpTiles n tiles before the hook, both rows in turn:
      // the MUFU pipe starts under the scaling's FFMAs instead of after them.
      float part[MTiles][2][NTiles];
#pragma unroll
      for (int nt = 0; nt < EarlyExpTiles; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h) exp_tiles<true>(s, 0, h, nt, nt + 1, scale_log2, base[0][h], part[0][h]);
      between(correction[0][0]);
#pragma unroll
      for (int mt = 0; mt < MTiles; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          exp_tiles<true>(s, mt, h, mt == 0 ? EarlyExpTiles : 0, NTiles, scale_log2, base[mt][h], part[mt][h]);
          sum_row(mt, h, part[mt][h], scale_log2, base[mt][h], tile_max[mt][h], correction);
        }
    }
  }
  // Row h of m tile mt: its max over the tile (tile_max), the row's new (or kept) max and O's
  // correction; returns the exponent base.
  __device__ float max_step(const float (&s)[MTiles][NTiles][4], int mt, int h, float scale_log2,
                            float (&correction)[MTiles][2], float& tile_max) {
    float part[NTiles];
#pragma unroll
    for (int nt = 0; nt < NTiles; ++nt) part[nt] = fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]);
    tile_max = tree_reduce(part, [](float a, float b) { return fmaxf(a, b); });
    const float seen = quad_max(fmaxf(row_max_log2[mt][h], __fmul_rn(tile_max, scale_log2)));
    // (From -inf any finite max moves: the difference is +inf.)
    const float m =
        MaxSlackLog2 == 0 || seen - row_max_log2[mt][h] > float(MaxSlackLog2) ? seen : row_max_log2[mt][h];
    const float base = m == kNegInf ? 0.0f : m;
    correction[mt][h] = sm80::ex2_approx_ftz(row_max_log2[mt][h] - base);
    row_max_log2[mt][h] = m;
    return base;
  }
  // The row's P = exp2(s * scale_log2 - base) in place, and its sum.
  __device__ void exp_step(float (&s)[MTiles][NTiles][4], int mt, int h, float scale_log2, float base, float tile_max,
                           const float (&correction)[MTiles][2]) {
    float part[NTiles];
    exp_tiles<false>(s, mt, h, 0, NTiles, scale_log2, base, part);
    sum_row(mt, h, part, scale_log2, base, tile_max, correction);
  }
  // N tiles nt0 to nt1 of row h of m tile mt (a thread's pair of scores each): P in place, each
  // pair's sum into part.
  template <bool Scaled>
  __device__ static void exp_tiles(float (&s)[MTiles][NTiles][4], int mt, int h, int nt0, int nt1, float scale_log2,
                                   float base, float (&part)[NTiles]) {
#pragma unroll
    for (int nt = nt0; nt < nt1; ++nt) {
      float& s0 = s[mt][nt][2 * h];
      float& s1 = s[mt][nt][2 * h + 1];
      s0 = sm80::ex2_approx_ftz(Scaled ? s0 : s0 * scale_log2 - base);
      s1 = sm80::ex2_approx_ftz(Scaled ? s1 : s1 * scale_log2 - base);
      part[nt] = s0 + s1;
    }
  }
  // The row's sum from its pairs' sums (part: every n tile's; reduced in place).
  __device__ void sum_row(int mt, int h, float (&part)[NTiles], float scale_log2, float base, float tile_max,
                          const float (&correction)[MTiles][2]) {
    row_sum[mt][h] = row_sum[mt][h] * correction[mt][h] + tree_reduce(part, [](float a, float b) { return a + b; });
    if constexpr (MaxSlackLog2 > 0) {
      // The thread's largest P of the tile, computed as its element was (the same FFMA and
      // MUFU: the same bits), and what rounding it to PIn for P V changed.
      const float top = sm80::ex2_approx_ftz(fmaf(tile_max, scale_log2, -base));
      top_rounding[mt][h] = top_rounding[mt][h] * correction[mt][h] + (rounded_to<PIn>(top) - top);
    }
  }
  // The same, rescaling the output buffer at once.
  template <class OBuf>
  __device__ void update(float (&s)[MTiles][NTiles][4], OBuf& out, float scale_log2) {
    float correction[MTiles][2];
    update_scores(s, scale_log2, correction);
    rescale(out, correction);
  }
  // x as the 16-bit input type holds it (round to nearest, as P's packing for P V).
  template <class T>
  __device__ static float rounded_to(float x) {
    if constexpr (std::is_same_v<T, __half>) {
      return __half2float(__float2half_rn(x));
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      return __bfloat162float(__float2bfloat16_rn(x));
    } else {
      return x;
    }
  }
  // A row's denominator for O (quad-reduced by the caller): the float sum, and with a kept max
  // the rounding of the thread's largest P's as P V took them.
  __device__ float o_denominator(int mt, int h) const {
    if constexpr (MaxSlackLog2 > 0) {
      return row_sum[mt][h] + top_rounding[mt][h];
    } else {
      return row_sum[mt][h];
    }
  }
  // Whether any row of the warp has a factor other than 1 (its max moved): O's rescale is
  // exact to skip otherwise. One vote, so the branch around the rescale is warp-uniform.
  __device__ static bool any_moved(const float (&correction)[MTiles][2]) {
    bool moved = false;
#pragma unroll
    for (int mt = 0; mt < MTiles; ++mt) moved |= correction[mt][0] != 1.0f || correction[mt][1] != 1.0f;
    return __any_sync(0xffffffffu, moved);
  }
  template <class OBuf>
  __device__ static void rescale(OBuf& out, const float (&correction)[MTiles][2]) {
#pragma unroll
    for (int mt = 0; mt < MTiles; ++mt) out.rescale(mt, correction[mt][0], correction[mt][1]);
  }

  // The natural-log LSE of a row from its base-2 max and quad-reduced sum: -inf for a row
  // that saw no key (sum 0), NaN for a row that read a NaN (its sum is NaN, see finalize; a
  // NaN query also leaves the max at -inf, since fmaxf skips NaN: -inf + NaN is NaN).
  // The sum is 0, >= 1 (its maximum's term is exp2(0)), +inf or NaN: never subnormal, so the
  // flushing log2 gives what __log2f does without its rescaling.
  __device__ static float row_lse(float max_log2, float sum) {
    return sum == 0.0f ? kNegInf : (max_log2 + sm80::lg2_approx_ftz(sum)) * kLn2;
  }
};

}  // namespace flashbuf
