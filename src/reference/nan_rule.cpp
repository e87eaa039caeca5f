// Reference/test utilities: the NaN rule's check (nan_rule.hpp).
#include "reference/nan_rule.hpp"

#include <cmath>
#include <sstream>

namespace flashbuf::reference {

NanRows split_rows_by_nan(const ProblemSpec& spec, const AttentionTensors& t) {
  NanRows r;
  for (const RowId& id : all_rows(spec)) (row_reads_nan(spec, t, id.b, id.i, id.h) ? r.nan_rows : r.clean_rows).push_back(id);
  return r;
}

std::string check_nan_rows(const ProblemSpec& spec, const AttentionTensors& t, const std::vector<RowId>& rows) {
  const RowResults out = gather_output(spec, t, rows);
  for (const RowId& id : rows) {
    const std::int64_t at = spec.q_row(id.b, id.i) * spec.heads_q + id.h;
    std::ostringstream where;
    where << "row (b " << id.b << ", i " << id.i << ", h " << id.h << ") reads a NaN: ";
    for (int d = 0; d < spec.head_dim_v; ++d) {
      const double o = out.o[at * spec.head_dim_v + d];
      if (!std::isnan(o)) return where.str() + "o[" + std::to_string(d) + "] = " + std::to_string(o) + ", expected NaN";
    }
    if (!t.lse.empty() && !std::isnan(out.lse[at]))
      return where.str() + "lse = " + std::to_string(out.lse[at]) + ", expected NaN";
  }
  return "";
}

}  // namespace flashbuf::reference
