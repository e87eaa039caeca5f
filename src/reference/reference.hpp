// Reference/test utilities: naive attention, one query row at a time, straight from the
// definition (softmax(scale · q kᵀ) v with the mask, softcap and GQA of the spec). It reads
// the host tensors through the spec's logical layout — its own indexing of batch, varlen and
// paged K/V, independent of the library's normalised problem — so a mistake in the library's
// address arithmetic cannot cancel out in the comparison.
//
// Two precisions:
//   float64: every step in double. The ground truth.
//   lowp:    what a same-precision kernel computes: inputs as stored (already rounded to the
//            dtype), scores and softmax in fp32, P rounded to the input dtype before P·V, fp32
//            accumulation, O rounded to the dtype. Its distance from float64 sets the error
//            budget (see check.hpp), as FlashAttention's tests do with PyTorch's own error.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/spec.hpp"

namespace flashbuf::reference {

enum class Precision { float64, lowp };

// Output of one (sequence b, query i, head h) row: o (head_dim_v values) and natural-log LSE.
// A row with no visible key gives o = 0 and lse = -inf.
void reference_row(const ProblemSpec& spec, const AttentionTensors& t, int b, int i, int h,
                   Precision precision, double* o, double& lse);

// Whether row (b, i, h) reads a NaN: in its query, or in a key or value row it sees. The
// NaN rule (flashbuf.hpp): such a row's O and LSE are NaN; every other row is unaffected.
bool row_reads_nan(const ProblemSpec& spec, const AttentionTensors& t, int b, int i, int h);

// Results in the "row-major logical" layout used by every comparison:
//   o[(row * heads_q + h) * head_dim_v + d], lse[row * heads_q + h],
// where row is a query row of q (spec.q_row(b, i)); rows not computed are left at 0.
struct RowResults {
  std::vector<double> o, lse;
};

struct RowId {
  int b, i, h;
};

// All rows of the problem, or a sample (the CLI checks a sample of big problems).
std::vector<RowId> all_rows(const ProblemSpec& spec);
std::vector<RowId> sample_rows(const ProblemSpec& spec, Rng& rng, int count);

RowResults reference_attention(const ProblemSpec& spec, const AttentionTensors& t,
                               const std::vector<RowId>& rows, Precision precision);
// The library's output (t.o, t.lse) for the same rows, in the same layout.
RowResults gather_output(const ProblemSpec& spec, const AttentionTensors& t, const std::vector<RowId>& rows);

// An attention sink joined to one reference row, in double, from the definition: one more
// logit that adds no value, lse' = ln(e^lse + e^sink) and o' = o e^(lse - lse'), at the
// formula's limits where it has none in floating point: a row without keys (lse = -inf) gives
// o' = 0 and lse' = sink; a sink of -inf adds nothing; a sink of +inf takes all the weight
// (o' = 0, lse' = +inf). A NaN LSE stays NaN. Returns the factor o is multiplied by.
double join_sink(double lse, double sink, double& lse_out);

}  // namespace flashbuf::reference
