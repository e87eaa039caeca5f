// Reference/test utilities: the NaN rule's check. A row that reads a NaN (its query, a key
// or value it sees; row_reads_nan) must give O = NaN in every element and LSE = NaN; the
// other rows are checked against the reference as usual (check.hpp), by the caller, over
// `clean_rows`.
#pragma once

#include <string>
#include <vector>

#include "reference/reference.hpp"

namespace flashbuf::reference {

struct NanRows {
  std::vector<RowId> nan_rows, clean_rows;
};
NanRows split_rows_by_nan(const ProblemSpec& spec, const AttentionTensors& t);

// The first violation among `rows` (O not all NaN, LSE not NaN), or "" if none.
std::string check_nan_rows(const ProblemSpec& spec, const AttentionTensors& t, const std::vector<RowId>& rows);

}  // namespace flashbuf::reference
