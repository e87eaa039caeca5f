// Host tests of the CPU backend's numerics beyond the random-input suite
// (test_cpu_backend.cpp): accumulation over a million keys, the NaN rule, sinks against a
// float64 reference computed here, the extremes of scale and softcap, and the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <thread>
#include <vector>

#include "cpu/parallel.hpp"
#include "host/reference_names.hpp"
#include "reference/check.hpp"
#include "reference/reference.hpp"
#include "reference/spec.hpp"

namespace flashbuf {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

ProblemSpec small_spec(DType dtype, int sq, int sk) {
  ProblemSpec s;
  s.batch = 1; s.seqlen_q = sq; s.seqlen_k = sk; s.heads_q = 2; s.heads_kv = 1;
  s.head_dim = 32; s.head_dim_v = 32; s.dtype = dtype;
  return s;
}

bool row_is_nan(const ProblemSpec& s, const AttentionTensors& t, int b, int i, int h) {
  if (!std::isnan(t.lse.at({b, h, i}))) return false;
  for (int d = 0; d < s.head_dim_v; ++d) {
    if (!std::isnan(t.o.at({b, i, h, d}))) return false;
  }
  return true;
}

// The rows for which `sees_poison(i)` is false, checked against the float64 reference.
void expect_clean_rows_match(const ProblemSpec& s, const AttentionTensors& t, const std::function<bool(int)>& sees_poison) {
  std::vector<reference::RowId> clean;
  for (int i = 0; i < s.seqlen_q; ++i) {
    for (int h = 0; h < s.heads_q; ++h) {
      if (sees_poison(i)) {
        EXPECT_TRUE(row_is_nan(s, t, 0, i, h)) << "row " << i << " head " << h << " read a NaN";
      } else {
        clean.push_back({0, i, h});
      }
    }
  }
  if (clean.empty()) return;
  const auto check = reference::check_attention(s, t, &clean);
  EXPECT_TRUE(check.ok) << s.describe() << ": " << check.summary();
}

// 2^20 identical keys: the exact output is v. Summing one key at a time in fp32 loses ~1e-2;
// the backend accumulates per tile and compensates across tiles.
TEST(CpuNumerics, MillionIdenticalKeysStayWithinFp32) {
  ProblemSpec s = small_spec(DType::fp32, 1, 1 << 20);
  s.heads_q = 1; s.head_dim = 16; s.head_dim_v = 16;
  Rng rng(7);
  AttentionTensors t = reference::make_tensors(s, rng, /*fill_inputs=*/false);
  std::vector<double> key(16), value(16);
  for (int d = 0; d < 16; ++d) {
    key[d] = 0.25 * (d % 5) - 0.5;
    value[d] = 1.0 + 0.37 * d - 0.011 * d * d;
    t.q.set(t.q.offset({0, 0, 0, d}), 0.1 * d - 0.7);
  }
  for (int j = 0; j < s.seqlen_k; ++j) {
    for (int d = 0; d < 16; ++d) {
      t.k.set(t.k.offset({0, j, 0, d}), key[d]);
      t.v.set(t.v.offset({0, j, 0, d}), value[d]);
    }
  }
  ASSERT_EQ(attention(reference::bind(s, t)), Backend::cpu);
  double worst = 0;
  for (int d = 0; d < 16; ++d) {
    const double v = static_cast<float>(value[d]);
    worst = std::max(worst, std::fabs(t.o.at({0, 0, 0, d}) - v) / std::fabs(v));
  }
  EXPECT_LE(worst, 1e-5);
  double dot = 0;
  for (int d = 0; d < 16; ++d) dot += static_cast<float>(0.1 * d - 0.7) * static_cast<float>(key[d]);
  const double want_lse = dot * s.scale() + std::log(double(s.seqlen_k));
  EXPECT_NEAR(t.lse.at({0, 0, 0}), want_lse, 1e-5 * std::fabs(want_lse));
}

TEST(CpuNumerics, NanInQueryGivesThatRowNan) {
  for (DType dtype : {DType::fp32, DType::bf16}) {
    ProblemSpec s = small_spec(dtype, 5, 300);
    Rng rng(11);
    AttentionTensors t = reference::make_tensors(s, rng);
    t.q.set(t.q.offset({0, 2, 1, 3}), kNaN);  // query 2, head 1
    ASSERT_EQ(attention(reference::bind(s, t)), Backend::cpu);
    EXPECT_TRUE(row_is_nan(s, t, 0, 2, 1));
    std::vector<reference::RowId> clean;
    for (int i = 0; i < 5; ++i)
      for (int h = 0; h < 2; ++h)
        if (!(i == 2 && h == 1)) clean.push_back({0, i, h});
    EXPECT_TRUE(reference::check_attention(s, t, &clean).ok);
  }
}

// A whole key tile of NaN keys (aligned to the backend's 64- or 128-key tiles, or not) gives
// NaN to every row that sees one of them, and to no other row.
TEST(CpuNumerics, NanKeysReachExactlyTheRowsThatSeeThem) {
  struct Span { int begin, end; };
  for (Span span : {Span{128, 256}, Span{64, 128}, Span{100, 101}, Span{0, 300}}) {
    for (MaskKind kind : {MaskKind::none, MaskKind::causal}) {
      for (DType dtype : {DType::fp32, DType::bf16}) {
        ProblemSpec s = small_spec(dtype, 300, 300);
        s.heads_q = 1;
        s.mask = kind == MaskKind::causal ? Mask::causal() : Mask::none();
        Rng rng(13);
        AttentionTensors t = reference::make_tensors(s, rng);
        for (int j = span.begin; j < span.end; ++j)
          for (int d = 0; d < s.head_dim; ++d) t.k.set(t.k.offset({0, j, 0, d}), kNaN);
        ASSERT_EQ(attention(reference::bind(s, t)), Backend::cpu);
        expect_clean_rows_match(s, t, [&](int i) { return kind == MaskKind::none || i >= span.begin; });
      }
    }
  }
}

TEST(CpuNumerics, NanValueGivesNanOutputAndLse) {
  for (DType dtype : {DType::fp32, DType::bf16, DType::fp16}) {
    ProblemSpec s = small_spec(dtype, 200, 200);
    s.heads_q = 1;
    s.mask = Mask::causal();
    Rng rng(17);
    AttentionTensors t = reference::make_tensors(s, rng);
    t.v.set(t.v.offset({0, 150, 0, 5}), kNaN);  // inside a tile that the mask cuts
    t.v.set(t.v.offset({0, 20, 0, 0}), std::numeric_limits<double>::infinity());
    t.k.set(t.k.offset({0, 20, 0, 0}), kNaN);  // key 20 is NaN too: rows >= 20 are NaN anyway
    ASSERT_EQ(attention(reference::bind(s, t)), Backend::cpu);
    expect_clean_rows_match(s, t, [](int i) { return i >= 20; });
  }
}

// Cache rows past a sequence's length, spare pages and the tail of a last page hold NaN:
// nothing of them reaches any output.
TEST(CpuNumerics, UnusedCacheRowsNeverLeak) {
  Rng rng(19);
  for (KvLayout kv : {KvLayout::batch, KvLayout::paged}) {
    ProblemSpec s = small_spec(DType::bf16, 7, 200);
    s.batch = 3; s.kv = kv; s.use_seqlens_k = kv == KvLayout::batch; s.page_size = 16;
    s.k_lens = {150, 1, 77};
    s.mask = Mask::causal();
    AttentionTensors t = reference::make_tensors(s, rng);
    std::set<std::int64_t> used_k, used_v;
    for (int b = 0; b < s.batch; ++b) {
      for (int j = 0; j < s.k_len(b); ++j) {
        for (int d = 0; d < s.head_dim; ++d) {
          std::int64_t ko, vo;
          if (kv == KvLayout::paged) {
            const reference::PagedRow at = reference::paged_row(s, t, b, j);
            ko = t.k.offset({at.page, at.row, 0, d});
            vo = t.v.offset({at.page, at.row, 0, d});
          } else {
            ko = t.k.offset({b, j, 0, d});
            vo = t.v.offset({b, j, 0, d});
          }
          used_k.insert(ko);
          used_v.insert(vo);
        }
      }
    }
    const auto& shape = t.k.shape();
    for (std::int64_t a = 0; a < shape[0]; ++a)
      for (std::int64_t j = 0; j < shape[1]; ++j)
        for (int d = 0; d < s.head_dim; ++d) {
          const std::int64_t ko = t.k.offset({a, j, 0, d}), vo = t.v.offset({a, j, 0, d});
          if (!used_k.count(ko)) t.k.set(ko, kNaN);
          if (!used_v.count(vo)) t.v.set(vo, kNaN);
        }
    ASSERT_EQ(attention(reference::bind(s, t)), Backend::cpu);
    const auto check = reference::check_attention(s, t);
    EXPECT_TRUE(check.ok) << s.describe() << ": " << check.summary();
  }
}

// Sinks: lse' = ln(e^lse + e^sink), o' = o · e^(lse - lse'); a row with no key gives o' = 0 and
// lse' = sink. The float64 (and same-precision) references come from reference/ without sinks
// and get the sink joined here (reference::join_sink, in double).
void apply_sinks(const ProblemSpec& s, const std::vector<reference::RowId>& rows, const std::vector<float>& sinks,
                 reference::RowResults& r) {
  for (std::size_t n = 0; n < rows.size(); ++n) {
    const std::int64_t at = s.q_row(rows[n].b, rows[n].i) * s.heads_q + rows[n].h;
    const double factor = reference::join_sink(r.lse[at], sinks[rows[n].h], r.lse[at]);
    for (int d = 0; d < s.head_dim_v; ++d) r.o[at * s.head_dim_v + d] *= factor;
  }
}

// The CPU backend on `s` with `sinks` (prefill, or decode through a plan), compared with the
// float64 and same-precision references with the same sinks joined.
struct SinkRun {
  reference::RowResults out;
  reference::Comparison o, lse;
};
SinkRun run_with_sinks(const ProblemSpec& s, AttentionTensors& t, std::vector<float> sinks, bool decode_path) {
  const TensorView sinks_view = make_view(sinks.data(), DType::fp32, {static_cast<std::int64_t>(sinks.size())});
  if (decode_path) {
    DecodeArgs args = reference::bind_decode(s, t);
    args.sinks = sinks_view;
    EXPECT_EQ(decode(plan_decode(reference::decode_problem(s)), args), Backend::cpu);
  } else {
    AttentionArgs args = reference::bind(s, t);
    args.sinks = sinks_view;
    EXPECT_EQ(attention(args), Backend::cpu);
  }
  const auto rows = reference::all_rows(s);
  reference::RowResults ref = reference::reference_attention(s, t, rows, reference::Precision::float64);
  reference::RowResults low = reference::reference_attention(s, t, rows, reference::Precision::lowp);
  apply_sinks(s, rows, sinks, ref);
  apply_sinks(s, rows, sinks, low);
  SinkRun run{reference::gather_output(s, t, rows), {}, {}};
  run.o = reference::compare(run.out.o, ref.o, low.o, reference::default_atol(s.dtype), "o");
  run.lse = reference::compare(run.out.lse, ref.lse, low.lse, reference::kLseAtol, "lse");
  EXPECT_TRUE(run.o.ok) << s.describe() << (decode_path ? " decode" : "") << ": " << run.o.detail;
  EXPECT_TRUE(run.lse.ok) << s.describe() << (decode_path ? " decode" : "") << ": " << run.lse.detail;
  return run;
}

TEST(CpuNumerics, SinksAgainstFloat64) {
  for (DType dtype : {DType::fp32, DType::bf16, DType::fp16}) {
    for (bool decode_path : {false, true}) {
      ProblemSpec s = small_spec(dtype, decode_path ? 3 : 40, 150);
      s.heads_q = 4; s.heads_kv = 2; s.batch = 2;
      s.mask = Mask::causal();
      if (decode_path) s.use_seqlens_k = true;
      if (!decode_path) s.seqlen_k = 30;  // causal with Sq > Sk: the first 10 rows see no key
      Rng rng(23 + static_cast<int>(dtype));
      AttentionTensors t = reference::make_tensors(s, rng);
      const std::vector<float> sinks = {-1.5f, 0.0f, 2.25f, 9.0f};
      const SinkRun run = run_with_sinks(s, t, sinks, decode_path);
      const reference::Comparison &o = run.o, &lse = run.lse;
      // The CPU backend's row of the sinks error table (the GPU paths' lines come from
      // tests/gpu/test_sinks.cu, in the same form; scripts/gpu/sinks.sh tabulates them).
      std::printf("[ sinks error ] CpuNumerics.SinksAgainstFloat64 %s %s | o %.3e %.3e | lse %.3e %.3e\n",
                  dtype_name(dtype), decode_path ? "decode" : "prefill", o.max_abs_err, o.bound, lse.max_abs_err,
                  lse.bound);
      if (!decode_path) {  // rows without keys: O = 0, LSE = sink
        for (int h = 0; h < 4; ++h) {
          EXPECT_EQ(t.lse.at({0, h, 0}), sinks[h]);
          EXPECT_EQ(t.o.at({0, 0, h, 0}), 0.0);
        }
      }
    }
  }
}

// Infinite sinks through both CPU paths, rows without keys included: -inf adds nothing, +inf
// takes all the weight (o = 0, lse = +inf), against the float64 reference at the same limits.
TEST(CpuNumerics, InfiniteSinksTakeTheirLimits) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  for (bool decode_path : {false, true}) {
    ProblemSpec s = small_spec(DType::bf16, decode_path ? 3 : 40, 150);
    s.heads_q = 4; s.heads_kv = 2; s.batch = 2;
    s.mask = Mask::causal();
    if (decode_path) {
      s.use_seqlens_k = true;
      s.k_lens = {0, 150};  // sequence 0: no key
    } else {
      s.seqlen_k = 30;  // causal with Sq > Sk: the first 10 rows see no key
    }
    Rng rng(29);
    AttentionTensors t = reference::make_tensors(s, rng);
    const reference::RowResults out = run_with_sinks(s, t, {-inf, inf, 1.5f, -inf}, decode_path).out;
    // Every row of head 1 (sink +inf): o = 0 and lse = +inf exactly; the first row of head 0
    // (sink -inf) has no key: o = 0, lse = -inf.
    int bad = 0;
    for (const reference::RowId& id : reference::all_rows(s)) {
      const std::int64_t at = s.q_row(id.b, id.i) * s.heads_q + id.h;
      if (id.h != 1) continue;
      if (out.lse[at] != inf) ++bad;
      for (int d = 0; d < s.head_dim_v; ++d) bad += out.o[at * s.head_dim_v + d] != 0.0;
    }
    EXPECT_EQ(bad, 0) << bad << " values of the +inf sink's head differ from o = 0, lse = +inf";
    EXPECT_EQ(out.lse[0], -static_cast<double>(inf));
    EXPECT_EQ(out.o[0], 0.0);
  }
}

// K and V rows that overlap (a row stride under the head dim: a view "inputs may share memory"
// allows) are read through the copying path, where the in-place products' descriptor would be
// refused by oneDNN (whose exception escaped as neither of flashbuf's errors).
TEST(CpuNumerics, OverlappingKeyAndValueRows) {
  constexpr int Sq = 4, Sk = 7, D = 64;
  for (std::int64_t row_stride : {1, 3, 63}) {
    std::vector<float> q(Sq * D), kv(std::size_t((Sk - 1) * row_stride + D)), o(Sq * D, std::numeric_limits<float>::quiet_NaN());
    for (std::size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.37f * float(i));
    for (std::size_t i = 0; i < kv.size(); ++i) kv[i] = std::cos(0.11f * float(i));
    AttentionArgs a;
    a.q = make_view(q.data(), DType::fp32, {1, Sq, 1, D});
    a.o = make_view(o.data(), DType::fp32, {1, Sq, 1, D});
    a.k = make_view(kv.data(), DType::fp32, {1, Sk, 1, D});
    a.k.stride[0] = Sk * row_stride, a.k.stride[1] = row_stride, a.k.stride[2] = D;
    a.v = a.k;
    ASSERT_EQ(attention(a), Backend::cpu) << "row stride " << row_stride;
    for (int i = 0; i < Sq; ++i) {  // float64 softmax(q k^T / sqrt(D)) v through the same strides
      std::vector<double> s(Sk);
      double m = -1e300, l = 0;
      for (int j = 0; j < Sk; ++j) {
        s[j] = 0;
        for (int d = 0; d < D; ++d) s[j] += double(q[i * D + d]) * kv[j * row_stride + d];
        s[j] /= std::sqrt(double(D));
        m = std::max(m, s[j]);
      }
      for (int j = 0; j < Sk; ++j) l += std::exp(s[j] - m);
      for (int d = 0; d < D; ++d) {
        double want = 0;
        for (int j = 0; j < Sk; ++j) want += std::exp(s[j] - m) / l * kv[j * row_stride + d];
        EXPECT_NEAR(o[i * D + d], want, 2e-5) << "row stride " << row_stride << " query " << i << " column " << d;
      }
    }
  }
}

// Softcap 1e-40 (every score within 1e-40 of 0: uniform weights), softcap 3e38 (tanh is the
// identity at these scores) and a scale of 1e38 (one key takes all the weight; the LSE
// passes FLT_MAX) are computed, not turned into NaN or empty rows.
TEST(CpuNumerics, ExtremeSoftcapAndScale) {
  for (DType dtype : {DType::fp32, DType::bf16}) {
    // The ends of the range the validator accepts (docs/errors.md) are computed, not lost; a
    // denormal or an overflowing softcap is refused by name before anything runs.
    for (float refused : {1e-40f, 3e38f}) {
      ProblemSpec s = small_spec(dtype, 9, 200);
      s.softcap = refused;
      Rng rng(23);
      AttentionTensors t = reference::make_tensors(s, rng);
      try {
        attention(reference::bind(s, t));
        ADD_FAILURE() << "softcap " << refused << " was accepted";
      } catch (const ArgumentError& e) {
        EXPECT_EQ(e.argument(), "softcap");
      }
    }
    for (float softcap : {std::numeric_limits<float>::min(), 2e38f}) {
      ProblemSpec s = small_spec(dtype, 9, 200);
      s.softcap = softcap;
      Rng rng(29);
      AttentionTensors t = reference::make_tensors(s, rng);
      ASSERT_EQ(attention(reference::bind(s, t)), Backend::cpu);
      const auto check = reference::check_attention(s, t);
      EXPECT_TRUE(check.ok) << s.describe() << ": " << check.summary();
    }
    ProblemSpec s = small_spec(dtype, 9, 200);
    s.softmax_scale = 1e38f;
    Rng rng(31);
    AttentionTensors t = reference::make_tensors(s, rng);
    ASSERT_EQ(attention(reference::bind(s, t)), Backend::cpu);
    const auto rows = reference::all_rows(s);
    const reference::RowResults ref = reference::reference_attention(s, t, rows, reference::Precision::float64);
    const reference::RowResults out = reference::gather_output(s, t, rows);
    for (std::size_t n = 0; n < out.o.size(); ++n) ASSERT_NEAR(out.o[n], ref.o[n], 1e-6) << n;
    for (std::size_t n = 0; n < out.lse.size(); ++n) {
      const double want = static_cast<float>(ref.lse[n]);  // the fp32 LSE: inf past FLT_MAX
      if (std::isinf(want)) EXPECT_EQ(out.lse[n], want);
      else EXPECT_NEAR(out.lse[n], want, 1e-6 * std::fabs(want));
    }
  }
}

// Prefill packs K (and V where it cannot be read in place) once per call: paged caches with
// page sizes that do not divide the key tile, widened fp16, windows, several query tiles.
TEST(CpuNumerics, PackedKeyTilesAcrossLayouts) {
  Rng rng(41);
  for (DType dtype : {DType::fp16, DType::bf16, DType::fp32}) {
    for (KvLayout kv : {KvLayout::paged, KvLayout::varlen, KvLayout::batch}) {
      ProblemSpec s = small_spec(dtype, 300, 333);
      s.batch = 2; s.heads_q = 4; s.heads_kv = 2; s.head_dim = 64; s.head_dim_v = 48;
      s.kv = kv; s.page_size = 24; s.varlen_q = kv == KvLayout::varlen;
      s.use_seqlens_k = kv == KvLayout::batch;
      reference::randomize_lengths(s, rng, s.varlen_q ? 150 : 300, 300, 100, 333);
      s.mask = kv == KvLayout::batch ? Mask::window(90, 7) : Mask::causal();
      AttentionTensors t = reference::make_tensors(s, rng);
      ASSERT_EQ(attention(reference::bind(s, t)), Backend::cpu);
      const auto check = reference::check_attention(s, t);
      EXPECT_TRUE(check.ok) << s.describe() << ": " << check.summary();
    }
  }
}

TEST(CpuNumerics, ThreadCountIsHonoured) {
  ProblemSpec s = small_spec(DType::bf16, 300, 300);
  s.batch = 2; s.heads_q = 4; s.heads_kv = 2;  // 2 x 2 x ceil(600 / 128) = 20 items
  Rng rng(37);
  AttentionTensors t = reference::make_tensors(s, rng);
  std::vector<double> first;
  for (int threads : {1, 2, 3, 1}) {
    AttentionArgs args = reference::bind(s, t);
    args.num_threads = threads;
    ASSERT_EQ(attention(args), Backend::cpu);
    EXPECT_EQ(detail::cpu::last_team_size(), threads);
    std::vector<double> o(t.o.numel());
    for (std::int64_t n = 0; n < t.o.numel(); ++n) o[n] = t.o.get(t.o.logical_to_storage(n));
    if (first.empty()) first = o;
    EXPECT_EQ(o, first) << "results depend on the thread count (" << threads << ")";
  }
  // A count beyond the machine is capped (a team of thousands can fail to start and end the
  // process), with the same results.
  AttentionArgs huge = reference::bind(s, t);
  huge.num_threads = std::numeric_limits<int>::max();
  ASSERT_EQ(attention(huge), Backend::cpu);
  EXPECT_GE(detail::cpu::last_team_size(), 1);
  EXPECT_LE(detail::cpu::last_team_size(), 20);  // the items
  std::vector<double> o_huge(t.o.numel());
  for (std::int64_t n = 0; n < t.o.numel(); ++n) o_huge[n] = t.o.get(t.o.logical_to_storage(n));
  EXPECT_EQ(o_huge, first);
  const int cap = detail::cpu::resolve_thread_count(std::numeric_limits<int>::max(), std::int64_t(1) << 40);
  EXPECT_GE(cap, 1);
  const int default_team = detail::cpu::resolve_thread_count(0, std::int64_t(1) << 40);
  EXPECT_LE(cap, std::max(4 * static_cast<int>(std::thread::hardware_concurrency()), default_team));
  // Decode takes the count too.
  ProblemSpec d = small_spec(DType::bf16, 1, 500);
  d.batch = 4; d.heads_q = 8; d.heads_kv = 2; d.use_seqlens_k = true; d.k_lens = {500, 3, 250, 1};
  AttentionTensors td = reference::make_tensors(d, rng);
  const DecodePlan plan = plan_decode(reference::decode_problem(d));
  for (int threads : {1, 2}) {
    DecodeArgs args = reference::bind_decode(d, td);
    args.num_threads = threads;
    ASSERT_EQ(decode(plan, args), Backend::cpu);
    EXPECT_EQ(detail::cpu::last_team_size(), threads);
  }
}

}  // namespace
}  // namespace flashbuf
