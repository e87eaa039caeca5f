// Host tests: every feature of the CPU backend against the float64 reference (reference/),
// on fresh random inputs (the seed is printed on failure) with odd sizes, poisoned outputs
// and guard regions; plus differential tests (paged vs contiguous, varlen vs per-sequence,
// decode vs attention, merge_states vs one pass) and the empty-row rules (O = 0, LSE = -inf).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "host/reference_names.hpp"
#include "reference/check.hpp"
#include "reference/reference.hpp"
#include "reference/spec.hpp"

namespace flashbuf {
namespace {

ProblemSpec base_spec(DType dtype = DType::bf16) {
  ProblemSpec s;
  s.batch = 2;
  s.seqlen_q = 17;
  s.seqlen_k = 133;  // more than one 64-key tile: the online rescale is exercised
  s.heads_q = 4;
  s.heads_kv = 2;
  s.head_dim = 64;
  s.head_dim_v = 64;
  s.dtype = dtype;
  return s;
}

// Runs attention on the CPU and checks every row, every guard and every output element.
AttentionTensors run_checked(const ProblemSpec& spec, std::uint64_t seed = Rng::fresh_seed()) {
  Rng rng(seed);
  AttentionTensors t = reference::make_tensors(spec, rng);
  const AttentionArgs args = reference::bind(spec, t);
  EXPECT_EQ(attention(args), Backend::cpu);
  const auto check = reference::check_attention(spec, t);
  EXPECT_TRUE(check.ok) << spec.describe() << " seed " << seed << ": " << check.summary();
  return t;
}

TEST(CpuBackend, DtypesAgainstReference) {
  for (DType dtype : {DType::bf16, DType::fp16, DType::fp32}) run_checked(base_spec(dtype));
}

TEST(CpuBackend, OddSizes) {
  struct Case { int b, sq, sk, hq, hkv, d, dv; };
  for (const Case& c : {Case{1, 1, 1, 1, 1, 1, 1}, Case{3, 1, 127, 3, 1, 17, 33},
                        Case{1, 127, 1, 2, 2, 40, 24}, Case{2, 65, 129, 2, 1, 96, 96},
                        Case{1, 3, 1000, 2, 1, 128, 128}, Case{1, 63, 64, 1, 1, 192, 128},
                        Case{1, 5, 70, 2, 2, 256, 256}}) {
    for (MaskKind kind : {MaskKind::none, MaskKind::causal}) {
      ProblemSpec s = base_spec(DType::fp16);
      s.batch = c.b; s.seqlen_q = c.sq; s.seqlen_k = c.sk; s.heads_q = c.hq; s.heads_kv = c.hkv;
      s.head_dim = c.d; s.head_dim_v = c.dv;
      s.mask = kind == MaskKind::causal ? Mask::causal() : Mask::none();
      run_checked(s);
    }
  }
}

TEST(CpuBackend, LongCausalSequence) {
  ProblemSpec s = base_spec(DType::bf16);
  s.batch = 1; s.seqlen_q = 1000; s.seqlen_k = 1000; s.heads_q = 2; s.heads_kv = 1; s.head_dim = 64; s.head_dim_v = 64;
  s.mask = Mask::causal();
  run_checked(s);
}

TEST(CpuBackend, CausalBottomRightAlignment) {
  for (auto [sq, sk] : {std::pair{17, 140}, std::pair{140, 17}, std::pair{133, 133}, std::pair{1, 9}}) {
    ProblemSpec s = base_spec(DType::fp32);
    s.seqlen_q = sq; s.seqlen_k = sk; s.mask = Mask::causal();
    run_checked(s);
  }
}

// Windows wider than every sequence bind nothing, up to INT_MAX (the diagonal plus such a
// window once overflowed int and hid every key).
TEST(CpuBackend, SlidingWindows) {
  constexpr int kHuge = std::numeric_limits<int>::max();
  for (auto [l, r] : {std::pair{0, 0}, std::pair{5, 0}, std::pair{-1, 3}, std::pair{7, -1}, std::pair{3, 11},
                      std::pair{100, 100}, std::pair{90, 70}, std::pair{kHuge, kHuge}, std::pair{kHuge, 0},
                      std::pair{-1, kHuge}, std::pair{kHuge - 1, 3}}) {
    ProblemSpec s = base_spec(DType::bf16);
    s.seqlen_q = 70; s.seqlen_k = 90; s.mask = Mask::window(l, r);
    run_checked(s);
  }
}

TEST(CpuBackend, SoftcapAndScale) {
  ProblemSpec s = base_spec(DType::bf16);
  s.softcap = 2.5f;
  s.input_stddev = 3.0;  // scores large enough that the cap bites
  run_checked(s);
  s.softcap = 0.0f;
  s.softmax_scale = 0.37f;
  run_checked(s);
  s.softcap = 30.0f;
  s.mask = Mask::causal();
  run_checked(s);
}

TEST(CpuBackend, GroupedQueryAndMultiQuery) {
  for (auto [hq, hkv] : {std::pair{8, 2}, std::pair{6, 1}, std::pair{5, 5}, std::pair{16, 4}}) {
    ProblemSpec s = base_spec(DType::fp16);
    s.heads_q = hq; s.heads_kv = hkv; s.mask = Mask::causal();
    run_checked(s);
  }
}

TEST(CpuBackend, VarlenWithZeroLengthSequences) {
  Rng rng(Rng::fresh_seed());
  for (KvLayout kv : {KvLayout::varlen, KvLayout::paged, KvLayout::batch}) {
    ProblemSpec s = base_spec(DType::bf16);
    s.batch = 5;
    s.varlen_q = true;
    s.kv = kv;
    s.page_size = 3;
    s.seqlen_k = 80;
    s.use_seqlens_k = kv == KvLayout::batch;
    reference::randomize_lengths(s, rng, 0, 70, 0, 80);
    s.q_lens[1] = 0;   // a sequence with no queries
    s.k_lens[2] = 0;   // one with no keys: its rows give O = 0, LSE = -inf
    s.mask = Mask::causal();
    run_checked(s, rng.seed() + static_cast<int>(kv));
  }
}

TEST(CpuBackend, PagedPageSizes) {
  Rng rng(Rng::fresh_seed());
  for (int page : {1, 3, 16, 256}) {
    ProblemSpec s = base_spec(DType::fp16);
    s.batch = 3; s.kv = KvLayout::paged; s.page_size = page; s.seqlen_q = 9;
    reference::randomize_lengths(s, rng, 9, 9, 0, 300);
    s.mask = Mask::causal();
    run_checked(s);
  }
}

TEST(CpuBackend, BatchWithSeqlensK) {
  Rng rng(Rng::fresh_seed());
  ProblemSpec s = base_spec(DType::bf16);
  s.batch = 4; s.seqlen_k = 100; s.use_seqlens_k = true;
  reference::randomize_lengths(s, rng, s.seqlen_q, s.seqlen_q, 0, 100);
  s.mask = Mask::window(20, 0);
  run_checked(s);
}

TEST(CpuBackend, StridedViewsLeavePaddingUntouched) {
  ProblemSpec s = base_spec(DType::bf16);
  s.pad = 8;  // every row of q, k, v, o is followed by 8 poisoned elements
  s.mask = Mask::causal();
  run_checked(s);
  s.kv = KvLayout::paged; s.page_size = 16; s.seqlen_k = 40;
  run_checked(s);
}

TEST(CpuBackend, WithoutLse) {
  ProblemSpec s = base_spec(DType::fp16);
  s.lse = false;
  run_checked(s);
}

TEST(CpuBackend, RowsWithoutKeysAreZeroWithMinusInfinityLse) {
  ProblemSpec s = base_spec(DType::bf16);
  s.seqlen_q = 40; s.seqlen_k = 10; s.mask = Mask::causal();  // the first 30 rows see nothing
  AttentionTensors t = run_checked(s);
  for (int b = 0; b < s.batch; ++b) {
    for (int i = 0; i < 30; ++i) {
      for (int h = 0; h < s.heads_q; ++h) {
        EXPECT_TRUE(std::isinf(t.lse.at({b, h, i})) && t.lse.at({b, h, i}) < 0);
        for (int d = 0; d < s.head_dim_v; ++d) ASSERT_EQ(t.o.at({b, i, h, d}), 0.0);
      }
    }
  }
  // No keys at all.
  s.seqlen_k = 0; s.mask = Mask::none();
  t = run_checked(s);
  EXPECT_TRUE(std::isinf(t.lse.at({0, 0, 0})));
}

// The same arithmetic runs whether K/V are paged or contiguous: results are bit-identical.
TEST(CpuBackend, PagedEqualsContiguous) {
  const std::uint64_t seed = Rng::fresh_seed();
  Rng rng(seed);
  ProblemSpec paged = base_spec(DType::bf16);
  paged.batch = 3; paged.kv = KvLayout::paged; paged.page_size = 7; paged.mask = Mask::causal();
  reference::randomize_lengths(paged, rng, paged.seqlen_q, paged.seqlen_q, 1, 90);
  AttentionTensors tp = reference::make_tensors(paged, rng);
  ASSERT_EQ(attention(reference::bind(paged, tp)), Backend::cpu);

  ProblemSpec contiguous = paged;
  contiguous.kv = KvLayout::batch; contiguous.use_seqlens_k = true; contiguous.seqlen_k = paged.max_k_len();
  AttentionTensors tc = reference::make_tensors(contiguous, rng);
  tc.q = tp.q;
  for (int b = 0; b < paged.batch; ++b) {  // copy the paged rows into the contiguous cache
    for (int j = 0; j < paged.k_len(b); ++j) {
      const reference::PagedRow at = reference::paged_row(paged, tp, b, j);
      for (int h = 0; h < paged.heads_kv; ++h) {
        for (int d = 0; d < paged.head_dim; ++d) {
          tc.k.set(tc.k.offset({b, j, h, d}), tp.k.at({at.page, at.row, h, d}));
          tc.v.set(tc.v.offset({b, j, h, d}), tp.v.at({at.page, at.row, h, d}));
        }
      }
    }
  }
  ASSERT_EQ(attention(reference::bind(contiguous, tc)), Backend::cpu);
  ASSERT_EQ(tp.o.storage_bytes(), tc.o.storage_bytes());
  EXPECT_EQ(std::memcmp(tp.o.data(), tc.o.data(), tp.o.storage_bytes()), 0) << "seed " << seed;
  EXPECT_EQ(std::memcmp(tp.lse.data(), tc.lse.data(), tp.lse.storage_bytes()), 0) << "seed " << seed;
}

// A varlen batch gives exactly what each sequence gives on its own.
TEST(CpuBackend, VarlenEqualsPerSequenceRuns) {
  const std::uint64_t seed = Rng::fresh_seed();
  Rng rng(seed);
  ProblemSpec s = base_spec(DType::fp16);
  s.batch = 4; s.varlen_q = true; s.kv = KvLayout::varlen; s.mask = Mask::window(9, 2);
  reference::randomize_lengths(s, rng, 0, 50, 0, 60);
  AttentionTensors t = reference::make_tensors(s, rng);
  ASSERT_EQ(attention(reference::bind(s, t)), Backend::cpu);
  std::int64_t q_row = 0, k_row = 0;
  for (int b = 0; b < s.batch; ++b) {
    ProblemSpec one = s;
    one.batch = 1; one.varlen_q = false; one.kv = KvLayout::batch;
    one.q_lens.clear(); one.k_lens.clear();
    one.seqlen_q = s.q_len(b); one.seqlen_k = s.k_len(b);
    AttentionTensors u = reference::make_tensors(one, rng);
    reference::copy_varlen_sequence(t, q_row, k_row, one, u);
    ASSERT_EQ(attention(reference::bind(one, u)), Backend::cpu);
    for (int i = 0; i < one.seqlen_q; ++i)
      for (int h = 0; h < s.heads_q; ++h) {
        ASSERT_EQ(u.lse.at({0, h, i}), t.lse.at({h, q_row + i})) << "seed " << seed;
        for (int d = 0; d < s.head_dim_v; ++d)
          ASSERT_EQ(u.o.at({0, i, h, d}), t.o.at({q_row + i, h, d})) << "seed " << seed;
      }
    q_row += one.seqlen_q;
    k_row += one.seqlen_k;
  }
}

TEST(CpuBackend, DecodeMatchesReferenceAndAttention) {
  Rng rng(Rng::fresh_seed());
  for (int q_per_seq : {1, 4, 16}) {
    for (int page : {0, 16}) {
      ProblemSpec s = base_spec(DType::bf16);
      s.batch = 3; s.seqlen_q = q_per_seq; s.heads_q = 8; s.heads_kv = 2; s.head_dim = 128; s.head_dim_v = 128;
      s.seqlen_k = 300;
      if (page) { s.kv = KvLayout::paged; s.page_size = page; } else { s.use_seqlens_k = true; }
      reference::randomize_lengths(s, rng, q_per_seq, q_per_seq, 0, 300);
      s.mask = Mask::causal();
      AttentionTensors t = reference::make_tensors(s, rng);
      const DecodePlan plan = plan_decode(reference::decode_problem(s));
      EXPECT_EQ(plan.num_splits, 1);
      EXPECT_EQ(plan.workspace_bytes, 0u);
      ASSERT_EQ(decode(plan, reference::bind_decode(s, t)), Backend::cpu);
      const auto check = reference::check_attention(s, t);
      EXPECT_TRUE(check.ok) << s.describe() << " seed " << rng.seed() << ": " << check.summary();
      AttentionTensors again = t;
      again.o.poison();
      again.lse.poison();
      ASSERT_EQ(attention(reference::bind(s, again)), Backend::cpu);
      EXPECT_EQ(std::memcmp(again.o.data(), t.o.data(), t.o.storage_bytes()), 0);
    }
  }
}

TEST(CpuBackend, EmptyProblemsDoNothing) {
  ProblemSpec s = base_spec(DType::bf16);
  s.batch = 0;
  Rng rng(1);
  AttentionTensors t = reference::make_tensors(s, rng);
  EXPECT_EQ(attention(reference::bind(s, t)), Backend::cpu);
  s.batch = 2; s.seqlen_q = 0;
  t = reference::make_tensors(s, rng);
  EXPECT_EQ(attention(reference::bind(s, t)), Backend::cpu);
  DecodeProblem d{};
  d.batch = 0; d.heads_q = 1; d.heads_kv = 1; d.head_dim = 8; d.head_dim_v = 8; d.device = DeviceKind::cpu;
  EXPECT_EQ(plan_decode(d).workspace_bytes, 0u);
}

// merge_states of attention over two disjoint key halves equals attention over all keys.
TEST(CpuBackend, MergeStatesOfSplitKeysEqualsOnePass) {
  const std::uint64_t seed = Rng::fresh_seed();
  Rng rng(seed);
  ProblemSpec s = base_spec(DType::fp32);
  s.batch = 1; s.seqlen_q = 13; s.seqlen_k = 90; s.heads_q = 4; s.heads_kv = 4; s.head_dim = 32; s.head_dim_v = 48;
  AttentionTensors t = reference::make_tensors(s, rng);
  ASSERT_EQ(attention(reference::bind(s, t)), Backend::cpu);

  const int split = 37, T = s.seqlen_q, H = s.heads_q, Dv = s.head_dim_v;
  reference::HostTensor o_parts(DType::fp32, {2, T, H, Dv}), lse_parts(DType::fp32, {2, T, H});
  for (int part = 0; part < 2; ++part) {
    AttentionArgs a = reference::bind(s, t);
    const int begin = part == 0 ? 0 : split, keys = part == 0 ? split : s.seqlen_k - split;
    a.k.data = static_cast<float*>(t.k.data()) + begin * t.k.strides()[1];
    a.v.data = static_cast<float*>(t.v.data()) + begin * t.v.strides()[1];
    a.k.shape[1] = a.v.shape[1] = keys;
    reference::HostTensor lse_bhs(DType::fp32, {1, H, T});
    a.o = o_parts.view();
    a.o.data = static_cast<float*>(o_parts.data()) + part * o_parts.strides()[0];
    a.o.rank = 4; a.o.shape[0] = 1;
    a.o.stride[0] = o_parts.strides()[0];
    a.lse = lse_bhs.view();
    ASSERT_EQ(attention(a), Backend::cpu);
    for (int i = 0; i < T; ++i)
      for (int h = 0; h < H; ++h) lse_parts.set(lse_parts.offset({part, i, h}), lse_bhs.at({0, h, i}));
  }
  // Make one part empty for one row: it must be ignored even if its O is garbage.
  lse_parts.set(lse_parts.offset({1, 0, 0}), -std::numeric_limits<double>::infinity());
  for (int d = 0; d < Dv; ++d) o_parts.set(o_parts.offset({1, 0, 0, d}), std::nan(""));

  reference::HostTensor o(DType::fp32, {T, H, Dv}), lse(DType::fp32, {T, H});
  MergeStatesArgs m;
  m.o_parts = o_parts.view(); m.lse_parts = lse_parts.view(); m.o = o.view(); m.lse = lse.view();
  ASSERT_EQ(merge_states(m), Backend::cpu);
  for (int i = 0; i < T; ++i)
    for (int h = 0; h < H; ++h) {
      if (i == 0 && h == 0) {
        EXPECT_EQ(lse.at({0, 0}), lse_parts.at({0, 0, 0}));
        for (int d = 0; d < Dv; ++d) EXPECT_EQ(o.at({0, 0, d}), o_parts.at({0, 0, 0, d}));
        continue;
      }
      EXPECT_NEAR(lse.at({i, h}), t.lse.at({0, h, i}), 1e-5) << "seed " << seed;
      for (int d = 0; d < Dv; ++d) EXPECT_NEAR(o.at({i, h, d}), t.o.at({0, i, h, d}), 2e-6) << "seed " << seed;
    }
  // All parts empty: O = 0, LSE = -inf.
  for (int part = 0; part < 2; ++part)
    for (int i = 0; i < T; ++i)
      for (int h = 0; h < H; ++h) lse_parts.set(lse_parts.offset({part, i, h}), -std::numeric_limits<double>::infinity());
  ASSERT_EQ(merge_states(m), Backend::cpu);
  EXPECT_TRUE(std::isinf(lse.at({3, 1})));
  EXPECT_EQ(o.at({3, 1, 5}), 0.0);
  EXPECT_TRUE(o.check_guards() && lse.check_guards());
}

// The LSE views may be strided: attention's (N, H, T) LSE merged through its transposed view,
// into an (H, T) LSE written through its transposed view, gives what contiguous views give.
TEST(CpuBackend, MergeStatesTakesTransposedLseViews) {
  Rng rng(Rng::fresh_seed());
  const int N = 3, T = 7, H = 5, Dv = 16;
  reference::HostTensor o_parts(DType::fp32, {N, T, H, Dv}), lse_nth(DType::fp32, {N, T, H});
  reference::HostTensor lse_nht(DType::fp32, {N, H, T});
  o_parts.fill_normal(rng);
  lse_nth.fill_normal(rng, 3.0);
  for (int n = 0; n < N; ++n)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h) lse_nht.set(lse_nht.offset({n, h, t}), lse_nth.at({n, t, h}));

  reference::HostTensor o_want(DType::fp32, {T, H, Dv}), lse_want(DType::fp32, {T, H});
  MergeStatesArgs want;
  want.o_parts = o_parts.view(); want.lse_parts = lse_nth.view(); want.o = o_want.view(); want.lse = lse_want.view();
  ASSERT_EQ(merge_states(want), Backend::cpu);

  reference::HostTensor o(DType::fp32, {T, H, Dv}), lse_ht(DType::fp32, {H, T});
  MergeStatesArgs m;
  m.o_parts = o_parts.view();
  m.o = o.view();
  m.lse_parts = lse_nht.view();  // (N, H, T) seen as (N, T, H)
  m.lse_parts.shape[1] = T; m.lse_parts.shape[2] = H;
  m.lse_parts.stride[1] = lse_nht.strides()[2]; m.lse_parts.stride[2] = lse_nht.strides()[1];
  m.lse = lse_ht.view();  // (H, T) seen as (T, H)
  m.lse.shape[0] = T; m.lse.shape[1] = H;
  m.lse.stride[0] = lse_ht.strides()[1]; m.lse.stride[1] = lse_ht.strides()[0];
  ASSERT_EQ(merge_states(m), Backend::cpu);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      EXPECT_EQ(lse_ht.at({h, t}), lse_want.at({t, h}));
      for (int d = 0; d < Dv; ++d) EXPECT_EQ(o.at({t, h, d}), o_want.at({t, h, d}));
    }
  EXPECT_TRUE(o.check_guards() && lse_ht.check_guards());
}

// merge_states of the parts at (t, h) in float64: each part weighed against the largest LSE.
struct MergedRow {
  double lse;
  std::vector<double> o;
};
MergedRow merge_in_float64(const reference::HostTensor& o_parts, const reference::HostTensor& lse_parts, int t,
                           int h) {
  const int parts = static_cast<int>(o_parts.shape()[0]), Dv = static_cast<int>(o_parts.shape()[3]);
  double mx = -1e300, total = 0;
  for (int n = 0; n < parts; ++n) mx = std::max(mx, lse_parts.at({n, t, h}));
  for (int n = 0; n < parts; ++n) total += std::exp(lse_parts.at({n, t, h}) - mx);
  MergedRow row{mx + std::log(total), std::vector<double>(Dv, 0.0)};
  for (int n = 0; n < parts; ++n) {
    const double w = std::exp(lse_parts.at({n, t, h}) - mx) / total;
    for (int d = 0; d < Dv; ++d) row.o[d] += w * o_parts.at({n, t, h, d});
  }
  return row;
}

// Many parts at large LSEs: every part weighs exp(lse_n - max) against one reference, so
// equal LSEs weigh equally however large they are. (A pairwise fold rounded the running LSE
// to fp32 after each part; from |LSE| ~1e7, where its spacing passes ln 2, the mean of eight
// equal-LSE parts came out as 7.0 for 4.5.)
TEST(CpuBackend, MergeStatesOfManyPartsAtLargeLse) {
  const std::uint64_t seed = Rng::fresh_seed();
  Rng rng(seed);
  const int N = 8, T = 6, H = 3, Dv = 8;
  const double centres[T] = {0.0, 1e4, 1e6, 1e8, -1e8, 1e30};
  reference::HostTensor o_parts(DType::fp32, {N, T, H, Dv}), lse_parts(DType::fp32, {N, T, H});
  o_parts.fill_normal(rng);
  lse_parts.fill_normal(rng, 2.0);
  for (int n = 0; n < N; ++n)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h) {
        // Head 0: every part at the centre exactly; the others spread around it (as fp32 holds it).
        const double lse = h == 0 ? centres[t] : centres[t] + lse_parts.at({n, t, h});
        lse_parts.set(lse_parts.offset({n, t, h}), lse);
      }
  reference::HostTensor o(DType::fp32, {T, H, Dv}), lse(DType::fp32, {T, H});
  MergeStatesArgs m;
  m.o_parts = o_parts.view(); m.lse_parts = lse_parts.view(); m.o = o.view(); m.lse = lse.view();
  ASSERT_EQ(merge_states(m), Backend::cpu);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      const MergedRow want = merge_in_float64(o_parts, lse_parts, t, h);
      EXPECT_NEAR(lse.at({t, h}), want.lse, 1e-5 + std::fabs(want.lse) * 2e-7)
          << "t " << t << " h " << h << " seed " << seed;
      for (int d = 0; d < Dv; ++d) {
        EXPECT_NEAR(o.at({t, h, d}), want.o[d], 1e-5) << "t " << t << " h " << h << " d " << d << " seed " << seed;
      }
    }
  EXPECT_TRUE(o.check_guards() && lse.check_guards());
}

TEST(CpuBackend, MergeStatesLowPrecision) {
  Rng rng(Rng::fresh_seed());
  const int N = 3, T = 5, H = 2, Dv = 24;
  for (DType dtype : {DType::bf16, DType::fp16}) {
    reference::HostTensor o_parts(dtype, {N, T, H, Dv}), lse_parts(DType::fp32, {N, T, H});
    o_parts.fill_normal(rng);
    lse_parts.fill_normal(rng, 3.0);
    reference::HostTensor o(dtype, {T, H, Dv});
    MergeStatesArgs m;
    m.o_parts = o_parts.view(); m.lse_parts = lse_parts.view(); m.o = o.view();
    ASSERT_EQ(merge_states(m), Backend::cpu);
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h) {
        const MergedRow want = merge_in_float64(o_parts, lse_parts, t, h);
        for (int d = 0; d < Dv; ++d) {
          EXPECT_NEAR(o.at({t, h, d}), want.o[d], 2 * reference::default_atol(dtype) + std::fabs(want.o[d]) * 1e-2);
        }
      }
  }
}

}  // namespace
}  // namespace flashbuf
