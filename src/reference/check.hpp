// Reference/test utilities: error metrics and the acceptance rule every attention test uses.
//
//   max |out - ref|  <=  2 · max |lowp - ref|  +  atol(dtype)
//
// ref is the float64 reference, lowp the naive same-precision implementation (reference.hpp):
// a kernel may be at most twice as far from the truth as a straightforward implementation in
// its own precision (FlashAttention's rule against PyTorch). atol absorbs the final rounding
// to the output dtype where lowp happens to be exact. LSE is fp32 in every dtype and gets its
// own small atol. NaN anywhere fails; -inf must match -inf exactly (rows with no key).
#pragma once

#include <string>
#include <vector>

#include "reference/reference.hpp"

namespace flashbuf::reference {

double max_abs_error(const std::vector<double>& out, const std::vector<double>& ref);
double relative_l2_error(const std::vector<double>& out, const std::vector<double>& ref);
double default_atol(DType dtype);
inline constexpr double kLseAtol = 1e-3;

struct Comparison {
  bool ok = true;
  double max_abs_err = 0;       // out vs float64
  double lowp_max_abs_err = 0;  // lowp vs float64
  double bound = 0;             // 2 * lowp + atol
  double rel_l2 = 0;
  std::string detail;           // on failure: what and where
};

// Compares out with ref under the rule above; `what` names the quantity in `detail`.
Comparison compare(const std::vector<double>& out, const std::vector<double>& ref,
                   const std::vector<double>& lowp, double atol, const std::string& what);

struct AttentionCheck {
  bool ok = true;
  Comparison o, lse;
  std::string guards;  // guard / padding violations, if any
  std::string summary() const;  // one line
};

// Checks t.o (and t.lse if present) against the references for `rows` (default: all rows),
// plus the guard regions of every tensor (inputs must stay untouched too).
AttentionCheck check_attention(const ProblemSpec& spec, const AttentionTensors& t,
                               const std::vector<RowId>* rows = nullptr);

// The same check against references computed elsewhere (the GPU tests compute them on the
// device, gpu_reference.hpp): `ref` and `low` are the float64 and lowp results of `rows`
// (default: all rows) in RowResults' layout.
AttentionCheck check_attention_against(const ProblemSpec& spec, const AttentionTensors& t,
                                       const std::vector<RowId>* rows, const RowResults& ref,
                                       const RowResults& low);

}  // namespace flashbuf::reference
