// Reference/test utilities: merge_states checked end to end (merge_check.hpp).
#include "reference/merge_check.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "flashbuf/core/numeric.hpp"

namespace flashbuf::reference {
namespace {

float round_to(DType dtype, float x) {
  switch (dtype) {
    case DType::bf16: return bf16_to_float(float_to_bf16(x));
    case DType::fp16: return fp16_to_float(float_to_fp16(x));
    default: return x;
  }
}

std::int64_t tokens(const ProblemSpec& s) { return std::int64_t(s.batch) * s.seqlen_q; }

}  // namespace

AttentionArgs slice_keys(const ProblemSpec& spec, AttentionArgs a, int begin, int end) {
  if (spec.kv != KvLayout::batch || spec.use_seqlens_k || spec.varlen_q)
    throw std::invalid_argument("slice_keys: batch-form q and K/V only");
  for (TensorView* view : {&a.k, &a.v}) {
    view->data = static_cast<char*>(view->data) + std::int64_t(begin) * view->stride[1] * std::int64_t(dtype_size(view->dtype));
    view->shape[1] = end - begin;
  }
  return a;
}

MergeTensors::MergeTensors(const ProblemSpec& s, int n)
    : parts(n),
      o_parts(s.dtype, {n, tokens(s), s.heads_q, s.head_dim_v}),
      lse_parts(DType::fp32, {n, tokens(s), s.heads_q}),
      o(s.dtype, {tokens(s), s.heads_q, s.head_dim_v}, s.pad),
      lse(DType::fp32, {tokens(s), s.heads_q}) {}

void MergeTensors::store_part(const ProblemSpec& s, int p, const AttentionTensors& t) {
  for (int b = 0; b < s.batch; ++b)
    for (int i = 0; i < s.seqlen_q; ++i) {
      const std::int64_t token = std::int64_t(b) * s.seqlen_q + i;
      for (int h = 0; h < s.heads_q; ++h) {
        for (int d = 0; d < s.head_dim_v; ++d) o_parts.set(o_parts.offset({p, token, h, d}), t.o.at({b, i, h, d}));
        lse_parts.set(lse_parts.offset({p, token, h}), t.lse.at({b, h, i}));
      }
    }
}

void MergeTensors::store_empty_part(const ProblemSpec& s, int p) {
  for (std::int64_t token = 0; token < tokens(s); ++token)
    for (int h = 0; h < s.heads_q; ++h) {
      for (int d = 0; d < s.head_dim_v; ++d) o_parts.set(o_parts.offset({p, token, h, d}), 0.0);
      lse_parts.set(lse_parts.offset({p, token, h}), -std::numeric_limits<double>::infinity());
    }
}

MergeStatesArgs MergeTensors::bind() {
  MergeStatesArgs a;
  a.o_parts = o_parts.view();
  a.lse_parts = lse_parts.view();
  a.o = o.view();
  a.lse = lse.view();
  return a;
}

AttentionCheck check_merge(const ProblemSpec& s, const MergeTensors& m, const RowResults& ref) {
  const std::int64_t T = tokens(s);
  const int H = s.heads_q, Dv = s.head_dim_v;
  RowResults out, low;
  out.o.resize(static_cast<std::size_t>(T * H * Dv));
  low.o.resize(out.o.size());
  out.lse.resize(static_cast<std::size_t>(T * H));
  low.lse.resize(out.lse.size());
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (std::int64_t token = 0; token < T; ++token)
    for (int h = 0; h < H; ++h) {
      const std::int64_t at = token * H + h;
      out.lse[at] = m.lse.at({token, h});
      for (int d = 0; d < Dv; ++d) out.o[at * Dv + d] = m.o.at({token, h, d});
      // The naive merge in fp32 of the parts as stored.
      float mx = neg_inf;
      for (int p = 0; p < m.parts; ++p) mx = std::max(mx, static_cast<float>(m.lse_parts.at({p, token, h})));
      if (mx == neg_inf) {
        low.lse[at] = neg_inf;
        for (int d = 0; d < Dv; ++d) low.o[at * Dv + d] = 0.0;
        continue;
      }
      float sum = 0.0f;
      std::vector<float> acc(Dv, 0.0f);
      for (int p = 0; p < m.parts; ++p) {
        const float w = std::exp(static_cast<float>(m.lse_parts.at({p, token, h})) - mx);
        sum += w;
        for (int d = 0; d < Dv; ++d) acc[d] += w * static_cast<float>(m.o_parts.at({p, token, h, d}));
      }
      for (int d = 0; d < Dv; ++d) low.o[at * Dv + d] = round_to(s.dtype, acc[d] / sum);
      low.lse[at] = mx + std::log(sum);
    }
  AttentionCheck c;
  c.o = compare(out.o, ref.o, low.o, default_atol(s.dtype), "o");
  c.lse = compare(out.lse, ref.lse, low.lse, kLseAtol, "lse");
  std::string what;
  if (!m.o.check_guards(&what)) c.guards += "o: " + what;
  if (!m.lse.check_guards(&what)) c.guards += (c.guards.empty() ? "" : "; ") + std::string("lse: ") + what;
  if (!m.o.fully_written()) c.guards += (c.guards.empty() ? "" : "; ") + std::string("o: some elements never written");
  if (!m.lse.fully_written()) c.guards += (c.guards.empty() ? "" : "; ") + std::string("lse: some elements never written");
  c.ok = c.o.ok && c.lse.ok && c.guards.empty();
  return c;
}

}  // namespace flashbuf::reference
