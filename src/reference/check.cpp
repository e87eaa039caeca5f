// Reference/test utilities: error metrics and the acceptance rule (see check.hpp).
#include "reference/check.hpp"

#include <cmath>
#include <limits>
#include <sstream>

namespace flashbuf::reference {

double max_abs_error(const std::vector<double>& out, const std::vector<double>& ref) {
  double m = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (std::isinf(out[i]) && out[i] == ref[i]) continue;
    const double e = std::fabs(out[i] - ref[i]);
    if (std::isnan(e)) return e;
    m = std::max(m, e);
  }
  return m;
}

double relative_l2_error(const std::vector<double>& out, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (std::isinf(ref[i]) && out[i] == ref[i]) continue;
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

double default_atol(DType dtype) {
  // About one unit in the last place of the dtype at magnitude 0.5-1 (typical outputs are
  // averages of unit-normal values): the final rounding alone can cost that much.
  switch (dtype) {
    case DType::bf16: return 1.0 / 256;
    case DType::fp16: return 1.0 / 2048;
    default: return 1e-5;
  }
}

Comparison compare(const std::vector<double>& out, const std::vector<double>& ref,
                   const std::vector<double>& lowp, double atol, const std::string& what) {
  Comparison c;
  std::size_t worst = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const bool out_inf = std::isinf(out[i]), ref_inf = std::isinf(ref[i]);
    if (std::isnan(out[i]) || out_inf != ref_inf || (out_inf && out[i] != ref[i])) {
      std::ostringstream s;
      s << what << "[" << i << "] = " << out[i] << ", expected " << ref[i];
      c.ok = false;
      c.detail = s.str();
      c.max_abs_err = std::numeric_limits<double>::infinity();
      return c;
    }
    if (ref_inf) continue;
    const double e = std::fabs(out[i] - ref[i]);
    if (e > c.max_abs_err) {
      c.max_abs_err = e;
      worst = i;
    }
  }
  c.lowp_max_abs_err = max_abs_error(lowp, ref);
  c.bound = 2 * c.lowp_max_abs_err + atol;
  c.rel_l2 = relative_l2_error(out, ref);
  if (!(c.max_abs_err <= c.bound)) {
    std::ostringstream s;
    s << what << " max abs error " << c.max_abs_err << " at [" << worst << "] (got " << out[worst]
      << ", expected " << ref[worst] << ") exceeds 2 x " << c.lowp_max_abs_err << " + " << atol;
    c.ok = false;
    c.detail = s.str();
  }
  return c;
}

std::string AttentionCheck::summary() const {
  std::ostringstream s;
  s << (ok ? "ok" : "FAIL") << ": o err " << o.max_abs_err << " (bound " << o.bound << ")";
  if (lse.bound > 0) s << ", lse err " << lse.max_abs_err << " (bound " << lse.bound << ")";
  if (!o.detail.empty()) s << "; " << o.detail;
  if (!lse.detail.empty()) s << "; " << lse.detail;
  if (!guards.empty()) s << "; " << guards;
  return s.str();
}

AttentionCheck check_attention(const ProblemSpec& spec, const AttentionTensors& t,
                               const std::vector<RowId>* rows) {
  const std::vector<RowId> every = rows ? std::vector<RowId>{} : all_rows(spec);
  const std::vector<RowId>& ids = rows ? *rows : every;
  return check_attention_against(spec, t, rows, reference_attention(spec, t, ids, Precision::float64),
                                 reference_attention(spec, t, ids, Precision::lowp));
}

AttentionCheck check_attention_against(const ProblemSpec& spec, const AttentionTensors& t,
                                       const std::vector<RowId>* rows, const RowResults& ref,
                                       const RowResults& low) {
  const std::vector<RowId> every = rows ? std::vector<RowId>{} : all_rows(spec);
  const std::vector<RowId>& ids = rows ? *rows : every;
  const RowResults out = gather_output(spec, t, ids);
  AttentionCheck c;
  c.o = compare(out.o, ref.o, low.o, default_atol(spec.dtype), "o");
  if (!t.lse.empty()) c.lse = compare(out.lse, ref.lse, low.lse, kLseAtol, "lse");
  const std::pair<const char*, const HostTensor*> all[] = {
      {"q", &t.q}, {"k", &t.k}, {"v", &t.v}, {"o", &t.o}, {"lse", &t.lse},
      {"cu_seqlens_q", &t.cu_seqlens_q}, {"cu_seqlens_k", &t.cu_seqlens_k},
      {"seqlens_k", &t.seqlens_k}, {"page_table", &t.page_table}};
  for (const auto& [name, tensor] : all) {
    std::string what;
    if (!tensor->empty() && !tensor->check_guards(&what)) {
      c.guards += std::string(c.guards.empty() ? "" : "; ") + name + ": " + what;
    }
  }
  // Unsampled rows of o must have been written too: a full check (no sample) sees them all.
  if (!rows && !t.o.fully_written()) c.guards += std::string(c.guards.empty() ? "" : "; ") + "o: some elements never written";
  if (!rows && !t.lse.empty() && !t.lse.fully_written()) c.guards += std::string(c.guards.empty() ? "" : "; ") + "lse: some elements never written";
  c.ok = c.o.ok && c.lse.ok && c.guards.empty();
  return c;
}

}  // namespace flashbuf::reference
