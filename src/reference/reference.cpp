// Reference/test utilities: naive float64 and same-precision attention (see reference.hpp).
#include "reference/reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "flashbuf/core/numeric.hpp"

namespace flashbuf::reference {
namespace {

constexpr double kNegInfD = -std::numeric_limits<double>::infinity();

// Bottom-right aligned mask, written out from the definition in flashbuf.hpp (not the core
// predicate, so the two are checked against each other).
bool sees(const ProblemSpec& s, int b, int i, int j) {
  const int sq = s.q_len(b), sk = s.k_len(b);
  const long diag = long(i) + sk - sq;
  int left = -1, right = -1;
  if (s.mask.kind == MaskKind::causal) right = 0;
  if (s.mask.kind == MaskKind::sliding_window) {
    left = s.mask.window_left;
    right = s.mask.window_right;
  }
  if (left >= 0 && j < diag - left) return false;
  if (right >= 0 && j > diag + right) return false;
  return true;
}

// Storage offsets of q/o row elements and of key/value rows, from the spec's layout.
std::int64_t q_offset(const ProblemSpec& s, const HostTensor& q, int b, int i, int h) {
  return s.varlen_q ? q.offset({s.q_row(b, i), h, 0}) : q.offset({b, i, h, 0});
}

std::int64_t kv_offset(const ProblemSpec& s, const AttentionTensors& t, const HostTensor& kv, int b, int j, int h) {
  switch (s.kv) {
    case KvLayout::batch: return kv.offset({b, j, h, 0});
    case KvLayout::varlen: {
      std::int64_t row = 0;
      for (int x = 0; x < b; ++x) row += s.k_len(x);
      return kv.offset({row + j, h, 0});
    }
    case KvLayout::paged: {
      const PagedRow at = paged_row(s, t, b, j);
      return kv.offset({at.page, at.row, h, 0});
    }
  }
  return 0;
}

float round_to(DType dtype, float x) {
  switch (dtype) {
    case DType::bf16: return bf16_to_float(float_to_bf16(x));
    case DType::fp16: return fp16_to_float(float_to_fp16(x));
    default: return x;
  }
}

}  // namespace

void reference_row(const ProblemSpec& s, const AttentionTensors& t, int b, int i, int h,
                   Precision precision, double* o, double& lse) {
  const int D = s.head_dim, Dv = s.head_dim_v, sk = s.k_len(b);
  const int hk = h / (s.heads_q / s.heads_kv);
  const std::int64_t qo = q_offset(s, t.q, b, i, h);
  std::vector<int> keys;
  for (int j = 0; j < sk; ++j) {
    if (sees(s, b, i, j)) keys.push_back(j);
  }
  std::fill(o, o + Dv, 0.0);
  if (keys.empty()) {
    lse = kNegInfD;
    return;
  }
  if (precision == Precision::float64) {
    std::vector<double> score(keys.size());
    double m = kNegInfD;
    for (std::size_t n = 0; n < keys.size(); ++n) {
      const std::int64_t ko = kv_offset(s, t, t.k, b, keys[n], hk);
      double dot = 0.0;
      for (int d = 0; d < D; ++d) dot += t.q.get(qo + d) * t.k.get(ko + d);
      double x = dot * s.scale();
      if (s.softcap > 0) x = s.softcap * std::tanh(x / s.softcap);
      score[n] = x;
      m = std::max(m, x);
    }
    double sum = 0.0;
    for (std::size_t n = 0; n < keys.size(); ++n) {
      const double p = std::exp(score[n] - m);
      sum += p;
      const std::int64_t vo = kv_offset(s, t, t.v, b, keys[n], hk);
      for (int d = 0; d < Dv; ++d) o[d] += p * t.v.get(vo + d);
    }
    for (int d = 0; d < Dv; ++d) o[d] /= sum;
    lse = m + std::log(sum);
    return;
  }
  // lowp: fp32 scores and softmax, P rounded to the input dtype, fp32 accumulation.
  std::vector<float> score(keys.size());
  float m = -std::numeric_limits<float>::infinity();
  const float scale = static_cast<float>(s.scale());
  for (std::size_t n = 0; n < keys.size(); ++n) {
    const std::int64_t ko = kv_offset(s, t, t.k, b, keys[n], hk);
    float dot = 0.0f;
    for (int d = 0; d < D; ++d) dot += static_cast<float>(t.q.get(qo + d)) * static_cast<float>(t.k.get(ko + d));
    float x = dot * scale;
    if (s.softcap > 0) x = s.softcap * std::tanh(x / s.softcap);
    score[n] = x;
    m = std::max(m, x);
  }
  float sum = 0.0f;
  std::vector<float> acc(Dv, 0.0f);
  for (std::size_t n = 0; n < keys.size(); ++n) {
    const float p = std::exp(score[n] - m);
    sum += p;
    const float p_low = round_to(s.dtype, p);
    const std::int64_t vo = kv_offset(s, t, t.v, b, keys[n], hk);
    for (int d = 0; d < Dv; ++d) acc[d] += p_low * static_cast<float>(t.v.get(vo + d));
  }
  for (int d = 0; d < Dv; ++d) o[d] = round_to(s.dtype, acc[d] / sum);
  lse = static_cast<double>(m + std::log(sum));
}

bool row_reads_nan(const ProblemSpec& s, const AttentionTensors& t, int b, int i, int h) {
  const int hk = h / (s.heads_q / s.heads_kv);
  const std::int64_t qo = q_offset(s, t.q, b, i, h);
  for (int d = 0; d < s.head_dim; ++d)
    if (std::isnan(t.q.get(qo + d))) return true;
  for (int j = 0; j < s.k_len(b); ++j) {
    if (!sees(s, b, i, j)) continue;
    const std::int64_t ko = kv_offset(s, t, t.k, b, j, hk), vo = kv_offset(s, t, t.v, b, j, hk);
    for (int d = 0; d < s.head_dim; ++d)
      if (std::isnan(t.k.get(ko + d))) return true;
    for (int d = 0; d < s.head_dim_v; ++d)
      if (std::isnan(t.v.get(vo + d))) return true;
  }
  return false;
}

std::vector<RowId> all_rows(const ProblemSpec& spec) {
  std::vector<RowId> rows;
  for (int b = 0; b < spec.batch; ++b) {
    for (int i = 0; i < spec.q_len(b); ++i) {
      for (int h = 0; h < spec.heads_q; ++h) rows.push_back({b, i, h});
    }
  }
  return rows;
}

std::vector<RowId> sample_rows(const ProblemSpec& spec, Rng& rng, int count) {
  std::vector<RowId> rows;
  for (int n = 0; n < count; ++n) {
    int b = rng.uniform_int(0, std::max(0, spec.batch - 1));
    if (spec.batch == 0 || spec.q_len(b) == 0) continue;
    // The first and last query of a sequence are the ones masks treat specially.
    const int i = n == 0 ? 0 : n == 1 ? spec.q_len(b) - 1 : rng.uniform_int(0, spec.q_len(b) - 1);
    rows.push_back({b, i, rng.uniform_int(0, spec.heads_q - 1)});
  }
  return rows;
}

RowResults reference_attention(const ProblemSpec& spec, const AttentionTensors& t,
                               const std::vector<RowId>& rows, Precision precision) {
  RowResults r;
  const std::int64_t Tq = spec.total_q();
  r.o.assign(static_cast<std::size_t>(Tq * spec.heads_q * spec.head_dim_v), 0.0);
  r.lse.assign(static_cast<std::size_t>(Tq * spec.heads_q), 0.0);
  for (const RowId& id : rows) {
    const std::int64_t at = spec.q_row(id.b, id.i) * spec.heads_q + id.h;
    reference_row(spec, t, id.b, id.i, id.h, precision, &r.o[at * spec.head_dim_v], r.lse[at]);
  }
  return r;
}

RowResults gather_output(const ProblemSpec& spec, const AttentionTensors& t, const std::vector<RowId>& rows) {
  RowResults r;
  const std::int64_t Tq = spec.total_q();
  r.o.assign(static_cast<std::size_t>(Tq * spec.heads_q * spec.head_dim_v), 0.0);
  r.lse.assign(static_cast<std::size_t>(Tq * spec.heads_q), 0.0);
  for (const RowId& id : rows) {
    const std::int64_t row = spec.q_row(id.b, id.i);
    const std::int64_t at = row * spec.heads_q + id.h;
    const std::int64_t oo = q_offset(spec, t.o, id.b, id.i, id.h);
    for (int d = 0; d < spec.head_dim_v; ++d) r.o[at * spec.head_dim_v + d] = t.o.get(oo + d);
    if (!t.lse.empty()) {
      r.lse[at] = spec.varlen_q ? t.lse.at({id.h, row}) : t.lse.at({id.b, id.h, id.i});
    }
  }
  return r;
}

double join_sink(double lse, double sink, double& lse_out) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (lse == -kInf || (sink == kInf && !std::isnan(lse))) {
    lse_out = sink;
    return 0.0;
  }
  if (sink == -kInf) {
    lse_out = lse;
    return 1.0;
  }
  const double m = std::max(lse, sink);
  lse_out = m + std::log(std::exp(lse - m) + std::exp(sink - m));
  return std::exp(lse - lse_out);
}

}  // namespace flashbuf::reference
