// Reference/test utilities for GPU tests (built only with CUDA): the naive attention of
// reference.hpp computed on the device, float64 and lowp, one thread block per query row. The
// same definition as the host reference (its own indexing of batch, varlen and paged K/V from
// the spec's logical layout, the bottom-right mask written out, the lowp steps in the same
// order with no fused multiply-adds), so check_attention_against applies the same
// twice-the-naive-error rule; the host reference stays for host tests and the CLI. It reads
// its own device copy of the host inputs, never the tensors a kernel under test was given.
#pragma once

#include <vector>

#include "reference/check.hpp"
#include "reference/reference.hpp"

namespace flashbuf::reference {

struct DeviceReferences {
  RowResults float64, lowp;
};

// Both precisions for `rows`, in RowResults' layout (rows not listed stay 0).
DeviceReferences gpu_reference_attention(const ProblemSpec& spec, const AttentionTensors& t,
                                         const std::vector<RowId>& rows);

// check_attention (check.hpp) with the references computed on the device.
AttentionCheck gpu_check_attention(const ProblemSpec& spec, const AttentionTensors& t,
                                   const std::vector<RowId>* rows = nullptr);

}  // namespace flashbuf::reference
