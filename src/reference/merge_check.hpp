// Reference/test utilities: merge_states checked end to end, as cascade and split-KV
// attention use it. The keys of a batch-form problem (no mask) are cut into parts; each part's
// O and LSE come from attention over its slice of the keys (slice_keys), are stored as the
// parts of a merge (MergeTensors::store_part; an empty part is O = 0, LSE = -inf), merged by
// merge_states, and the result is held to the float64 attention over all keys under the
// twice-the-naive-error rule, the naive result being the parts merged in fp32 as stored.
#pragma once

#include <vector>

#include "reference/check.hpp"
#include "reference/spec.hpp"

namespace flashbuf::reference {

// `args` (bound to batch-form K/V) narrowed to keys [begin, end): the K and V views start at
// key `begin` and hold end - begin keys (host or device pointers alike).
AttentionArgs slice_keys(const ProblemSpec& spec, AttentionArgs args, int begin, int end);

struct MergeTensors {
  int parts = 0;
  HostTensor o_parts, lse_parts;  // (parts, tokens, heads_q, head_dim_v) dtype; (parts, tokens, heads_q) fp32
  HostTensor o, lse;              // (tokens, heads_q, head_dim_v) poisoned, row pad spec.pad; (tokens, heads_q)

  MergeTensors(const ProblemSpec& spec, int parts);
  // Part p := one part's attention output (t.o, t.lse of the batch-form spec).
  void store_part(const ProblemSpec& spec, int p, const AttentionTensors& t);
  // Part p := no keys: O = 0, LSE = -inf.
  void store_empty_part(const ProblemSpec& spec, int p);
  // Host views (device pointers: bind each tensor's view to its device copy).
  MergeStatesArgs bind();
};

// Checks m.o / m.lse against `ref` (the float64 attention of all rows of `spec`, RowResults'
// layout: a token is row b * seqlen_q + i) and the guards of the merged tensors.
AttentionCheck check_merge(const ProblemSpec& spec, const MergeTensors& m, const RowResults& ref);

}  // namespace flashbuf::reference
