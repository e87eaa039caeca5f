// Host tests: the seeded fuzz campaign on the CPU backend (reference/fuzz.hpp): 12 shards of
// 30 cases (360 configurations: prefill, decode and merge_states), each against the float64
// reference under the twice-the-naive-error rule, with poisoned outputs, guard regions and
// strided views checked; every head dim (the CPU takes any), dtypes bf16, fp16 and fp32.
// Small sizes: the whole campaign takes well under a minute on two cores. A failure names the
// case and the run's seed; FLASHBUF_FUZZ_SEED=<seed> replays the run.
//
// Then the NaN rule (a row that reads a NaN gives NaN O and NaN LSE; no other row changes),
// in a test of its own, since the fuzz inputs are finite wherever a row reads.
#include <gtest/gtest.h>

#include <cstdlib>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "reference/check.hpp"
#include "reference/fuzz.hpp"
#include "reference/merge_check.hpp"
#include "reference/nan_rule.hpp"
#include "reference/reference.hpp"
#include "reference/spec.hpp"

namespace flashbuf::reference {
namespace {

constexpr int kShards = 12;
constexpr int kCasesPerShard = 30;

FuzzLimits cpu_limits() {
  FuzzLimits l;
  l.head_dims = {{64, 64}, {96, 96}, {128, 128}, {192, 128}, {192, 192}, {256, 256},
                 {16, 16}, {40, 72}, {80, 80}, {8, 24}};
  l.decode_head_dims = {64, 128, 256, 32, 96};
  l.dtypes = {DType::bf16, DType::fp16, DType::fp32};
  l.max_batch = 3;
  l.max_seqlen_q = 40;
  l.max_seqlen_k = 90;
  l.max_heads_kv = 2;
  l.max_decode_keys = 90;
  return l;
}

void run_prefill(FuzzCase& c, AttentionTensors& t) {
  AttentionArgs args = bind(c.spec, t);
  args.backend = Backend::cpu;
  args.num_threads = 1;
  ASSERT_EQ(attention(args), Backend::cpu);
}

void run_decode(FuzzCase& c, AttentionTensors& t) {
  const DecodePlan plan = plan_decode(decode_problem(c.spec, DeviceKind::cpu));
  DecodeArgs args = bind_decode(c.spec, t);
  args.num_threads = 1;
  ASSERT_EQ(decode(plan, args), Backend::cpu);
}

// Each part is attention over its key slice; the merge is held to attention over all keys.
void run_and_check_merge(FuzzCase& c, AttentionTensors& t) {
  const ProblemSpec& s = c.spec;
  MergeTensors m(s, c.merge_parts());
  for (int p = 0; p < c.merge_parts(); ++p) {
    const int begin = c.merge_bounds[p], end = c.merge_bounds[p + 1];
    if (begin == end) {
      m.store_empty_part(s, p);
      continue;
    }
    AttentionTensors part = t;  // same inputs, fresh poisoned outputs below
    part.o.poison();
    part.lse.poison();
    AttentionArgs args = slice_keys(s, bind(s, part), begin, end);
    args.backend = Backend::cpu;
    args.num_threads = 1;
    attention(args);
    m.store_part(s, p, part);
  }
  ASSERT_EQ(merge_states(m.bind()), Backend::cpu);
  const RowResults ref = reference_attention(s, t, all_rows(s), Precision::float64);
  const AttentionCheck check = check_merge(s, m, ref);
  EXPECT_TRUE(check.ok) << check.summary();
}

class FuzzCpu : public ::testing::TestWithParam<int> {};

TEST_P(FuzzCpu, AgainstFloat64Reference) {
  const std::uint64_t base = fuzz_base_seed(std::getenv("FLASHBUF_FUZZ_SEED"));
  SCOPED_TRACE("fuzz run seed " + std::to_string(base) + " (replay: FLASHBUF_FUZZ_SEED=" + std::to_string(base) + ")");
  const FuzzLimits limits = cpu_limits();
  for (int n = 0; n < kCasesPerShard; ++n) {
    const int index = GetParam() * kCasesPerShard + n;
    FuzzCase c = make_fuzz_case(index, fuzz_case_seed(base, index), limits);
    SCOPED_TRACE(c.describe());
    Rng rng(c.seed);
    AttentionTensors t = make_tensors(c.spec, rng);
    if (c.nan_in_unused_rows) poison_unused_kv_rows(c.spec, t);
    try {
      switch (c.entry) {
        case FuzzEntry::prefill: run_prefill(c, t); break;
        case FuzzEntry::decode: run_decode(c, t); break;
        case FuzzEntry::merge: run_and_check_merge(c, t); continue;
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "threw: " << e.what();
      continue;
    }
    const AttentionCheck check = check_attention(c.spec, t);
    EXPECT_TRUE(check.ok) << check.summary();
  }
}

INSTANTIATE_TEST_SUITE_P(Shards, FuzzCpu, ::testing::Range(0, kShards));

// ---- the NaN rule --------------------------------------------------------------------------

// NaN at element d of (tensor, index): helpers for the cases below.
void set_nan(HostTensor& x, std::initializer_list<std::int64_t> index) {
  x.set(x.offset(index), std::numeric_limits<double>::quiet_NaN());
}

// Runs `spec` on the CPU after `edit` put NaNs in its inputs: rows that read one give NaN O
// and LSE; every other row matches the reference.
template <class Edit>
void check_nan_rule(const ProblemSpec& spec, Edit edit) {
  Rng rng(Rng::fresh_seed());
  SCOPED_TRACE(spec.describe() + " seed " + std::to_string(rng.seed()));
  AttentionTensors t = make_tensors(spec, rng);
  edit(t);
  AttentionArgs args = bind(spec, t);
  args.backend = Backend::cpu;
  attention(args);
  const NanRows rows = split_rows_by_nan(spec, t);
  ASSERT_FALSE(rows.nan_rows.empty()) << "the case puts a NaN where some row reads it";
  EXPECT_EQ(check_nan_rows(spec, t, rows.nan_rows), "");
  const AttentionCheck clean = check_attention(spec, t, &rows.clean_rows);
  EXPECT_TRUE(clean.ok) << "rows that read no NaN: " << clean.summary();
}

ProblemSpec nan_spec(DType dtype) {
  ProblemSpec s;
  s.dtype = dtype;
  s.batch = 2;
  s.seqlen_q = 70;
  s.seqlen_k = 200;
  s.heads_q = 4;
  s.heads_kv = 2;
  s.mask = Mask::causal();
  return s;
}

// A NaN in one element of one query row: that row only.
TEST(NanRuleCpu, NanInAQueryRow) {
  for (DType dtype : {DType::bf16, DType::fp32}) {
    check_nan_rule(nan_spec(dtype), [](AttentionTensors& t) { set_nan(t.q, {1, 3, 2, 17}); });
  }
}

// A NaN in one key or one value: the rows that see it (causal: the later queries of its kv
// head's group), not the rows for which it is masked.
TEST(NanRuleCpu, NanInAVisibleKeyOrValue) {
  check_nan_rule(nan_spec(DType::bf16), [](AttentionTensors& t) {
    set_nan(t.k, {0, 150, 1, 5});   // seen by sequence 0's queries from i = 20 on, heads 2 and 3
    set_nan(t.v, {1, 190, 0, 63});  // seen by sequence 1's last queries, heads 0 and 1
  });
}

// A whole 64-key tile of NaN keys (keys 64..127) and a run of 63: both reach every row that
// sees one of them.
TEST(NanRuleCpu, TileOfNanKeys) {
  for (int count : {64, 63}) {
    check_nan_rule(nan_spec(DType::fp16), [count](AttentionTensors& t) {
      for (int j = 64; j < 64 + count; ++j)
        for (int d = 0; d < 64; ++d) set_nan(t.k, {0, j, 0, d});
    });
  }
}

// Paged K/V: a NaN in a used page's row reaches its rows; decode follows the same rule.
TEST(NanRuleCpu, PagedAndDecode) {
  ProblemSpec s;
  s.batch = 2;
  s.seqlen_q = 5;
  s.heads_q = 8;
  s.heads_kv = 2;
  s.kv = KvLayout::paged;
  s.page_size = 7;
  s.k_lens = {40, 23};
  s.mask = Mask::causal();
  Rng rng(Rng::fresh_seed());
  SCOPED_TRACE("seed " + std::to_string(rng.seed()));
  AttentionTensors t = make_tensors(s, rng);
  const int page = t.page_table.i32()[1 * s.max_pages() + 2];  // sequence 1, keys 14..20
  for (int d = 0; d < s.head_dim_v; ++d) t.v.set(t.v.offset({page, 3, 1, d}), std::numeric_limits<double>::quiet_NaN());
  for (const bool use_decode : {false, true}) {
    t.o.poison();
    t.lse.poison();
    if (use_decode) {
      decode(plan_decode(decode_problem(s, DeviceKind::cpu)), bind_decode(s, t));
    } else {
      AttentionArgs args = bind(s, t);
      args.backend = Backend::cpu;
      attention(args);
    }
    const NanRows rows = split_rows_by_nan(s, t);
    ASSERT_FALSE(rows.nan_rows.empty());
    EXPECT_EQ(check_nan_rows(s, t, rows.nan_rows), "") << (use_decode ? "decode" : "attention");
    const AttentionCheck clean = check_attention(s, t, &rows.clean_rows);
    EXPECT_TRUE(clean.ok) << (use_decode ? "decode" : "attention") << ", rows that read no NaN: " << clean.summary();
  }
}

}  // namespace
}  // namespace flashbuf::reference
