// CPU backend: one row of one score tile through the online softmax, vectorised. The caller's
// scores x are in units where p = exp2(beta * (x - max)) (beta > 0 finite): raw Q·Kᵀ with
// beta = |softmax_scale|·log2 e, or soft-capped scores with beta = log2 e. Keeping the scale out
// of the scores means no product with the scale can overflow before the max is subtracted,
// whatever finite scale or softcap validation lets through.
//
// NaN rule (DESIGN.md): a NaN among the visible scores makes the row's max NaN, and NaN then
// flows through every later rescale, sum and output of that row. Masked columns are never
// read, whatever they hold.
#pragma once

#include <cstdint>

namespace flashbuf::detail::cpu {

// Running state of one row: max in score units (-inf before any visible key, NaN once a
// visible score was NaN) and the Kahan-compensated sum of exp2(beta * (x - max)).
struct RowSoftmax {
  float max;
  float sum;
  float sum_compensation;
};

inline constexpr int kSoftmaxLanes = 16;  // columns per vector step; tiles are padded to it

// beta as the product of two finite factors, applied one after the other to x - max <= 0:
// |softmax_scale|·log2 e alone overflows fp32 for scales above about 2.4e38.
struct ExponentScale {
  float first;
  float second = 1.0f;
  double value() const { return double(first) * double(second); }
};
ExponentScale exponent_scale(double beta);

// Folds columns [visible_begin, visible_end) of x (width `width`, a multiple of
// kSoftmaxLanes) into `row` (the other columns of x are overwritten with -inf); writes P (exp2 of the shifted scores, 0 at masked columns) as fp32
// or as bf16 bits, and returns the factor the row's earlier output accumulators are
// multiplied by (0 when the row had seen nothing, 1 when the max did not move).
float online_softmax_row(float* x, int width, int visible_begin, int visible_end, ExponentScale beta,
                         RowSoftmax& row, float* p);
float online_softmax_row(float* x, int width, int visible_begin, int visible_end, ExponentScale beta,
                         RowSoftmax& row, std::uint16_t* p_bf16);

// acc = acc * rescale + tile, Kahan-compensated (acc_compensation carries the lost low bits),
// so a row's output over millions of keys keeps fp32 accuracy. n values. (compensated.cpp)
void accumulate_tile(float* acc, float* acc_compensation, const float* tile, float rescale, int n);
// The same for one value: sum = sum * rescale + add.
void compensated_fold(float& sum, float& compensation, float add, float rescale);

// True when any of the n values is NaN or infinite.
bool any_non_finite(const float* x, int n);
bool any_non_finite_bf16(const std::uint16_t* x, int n);

}  // namespace flashbuf::detail::cpu
