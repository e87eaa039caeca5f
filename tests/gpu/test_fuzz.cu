// GPU tests: the seeded fuzz campaign (reference/fuzz.hpp) on every kernel path, each case
// against the float64 reference computed on the device (reference/gpu_reference.hpp) under the
// twice-the-naive-error rule, with poisoned outputs, guard regions around every device tensor,
// and NaN in the cache rows no query may read. 20 shards of 28 cases (560 configurations):
//   prefill   even cases on the mma.sync kernel (sm80), odd ones on the Hopper kernel (sm90)
//             where it runs: batch-form problems with seqlen_q <= seqlen_k take its persistent
//             grid (at these sizes every such item is short enough to pay), the rest (varlen,
//             seqlens_k, paged, seqlen_q > seqlen_k) a block per query block; the script runs
//             the campaign again on a 3-block persistent grid (FLASHBUF_PREFILL_GRID=3);
//   decode    the plan's split count, unsplit, or a forced split count merged through the
//             workspace and the combine kernel or in thread-block clusters;
//   merge     attention over slices of the keys merged by merge_states.
// Plus long items (D 64's three-consumer blocks among them, rows sampled) and the NaN rule.
// A failure names the case and the run's seed; FLASHBUF_FUZZ_SEED=<seed> replays the run;
// FLASHBUF_FUZZ_SMALL=1 draws small sizes (for compute-sanitizer).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <tuple>
#include <memory>
#include <string>
#include <vector>

#include "api/backends.hpp"
#include "flashbuf/kernels/decode_config.cuh"
#include "gpu_test_util.cuh"
#include "reference/check.hpp"
#include "reference/device_mirror.hpp"
#include "reference/fuzz.hpp"
#include "reference/gpu_reference.hpp"
#include "reference/merge_check.hpp"
#include "reference/nan_rule.hpp"
#include "reference/spec.hpp"

namespace flashbuf::reference {
namespace {

namespace dk = ::flashbuf::kernels::decode;

constexpr int kShards = 20;
constexpr int kCasesPerShard = 28;

bool sm90_here() { return detail::sm90_prefill_available(0); }

// The bf16/fp16 head dims this build instantiated (FLASHBUF_INSTANTIATIONS and
// FLASHBUF_DECODE_INSTANTIATIONS).
FuzzLimits gpu_limits() {
  FuzzLimits l;
  const std::pair<int, int> all[] = {{64, 64}, {96, 96}, {128, 128}, {192, 128}, {192, 192}, {256, 256}};
  for (const auto& hd : all)
    if (detail::prefill_instantiated(DType::bf16, hd.first, hd.second) ||
        detail::prefill_instantiated(DType::fp16, hd.first, hd.second))
      l.head_dims.push_back(hd);
  for (int d : {64, 128, 256})
    if (detail::decode_instantiated(DType::bf16, d) || detail::decode_instantiated(DType::fp16, d))
      l.decode_head_dims.push_back(d);
  l.dtypes = {DType::bf16, DType::fp16};
  l.max_batch = 4;
  l.max_seqlen_q = 300;
  l.max_seqlen_k = 700;
  l.max_heads_kv = 4;
  l.max_decode_keys = 1500;
  // Small sizes for compute-sanitizer runs (scripts/gpu/fuzz.sh).
  if (const char* small = std::getenv("FLASHBUF_FUZZ_SMALL"); small != nullptr && *small != '\0' && *small != '0') {
    l.max_batch = 2;
    l.max_seqlen_q = 40;
    l.max_seqlen_k = 100;
    l.max_heads_kv = 2;
    l.max_decode_keys = 300;
  }
  return l;
}

// The case's dtype, switched to the other 16-bit one where its own is not built for these
// head dims; false when neither is.
bool built(FuzzCase& c) {
  auto ok = [&](DType dt) {
    return c.entry == FuzzEntry::decode ? detail::decode_instantiated(dt, c.spec.head_dim)
                                        : detail::prefill_instantiated(dt, c.spec.head_dim, c.spec.head_dim_v);
  };
  if (ok(c.spec.dtype)) return true;
  const DType other = c.spec.dtype == DType::bf16 ? DType::fp16 : DType::bf16;
  if (!ok(other)) return false;
  c.spec.dtype = other;
  return true;
}

// Which paths a shard took (printed at its end; the report counts them).
std::map<std::string, int>& coverage() {
  static std::map<std::string, int> counts;
  return counts;
}

// Prefill cases alternate between the kernels; merge cases (every 8th) alternate by block of 8.
Backend prefill_backend(const FuzzCase& c) {
  const int turn = c.entry == FuzzEntry::merge ? c.index / 8 : c.index;
  return turn % 2 == 1 && sm90_here() ? Backend::sm90 : Backend::sm80;
}

std::string prefill_path(const ProblemSpec& s, Backend backend) {
  if (backend == Backend::sm80) return "prefill sm80 (mma.sync)";
  const bool batch_form = !s.varlen_q && s.kv == KvLayout::batch && !s.use_seqlens_k;
  return batch_form && s.seqlen_q <= s.seqlen_k ? "prefill sm90 persistent grid" : "prefill sm90 block per query block";
}

// Runs prefill on the device; o and lse come back into t. Returns guard violations.
std::string run_prefill(const ProblemSpec& spec, AttentionTensors& t, Backend backend, int begin = 0, int end = -1) {
  DeviceProblem d(t);
  const TensorPointers ptrs = d.pointers();
  AttentionArgs args = bind(spec, t, DeviceKind::cuda, &ptrs);
  if (end >= 0) args = slice_keys(spec, args, begin, end);
  args.backend = backend;
  EXPECT_EQ(attention(args), backend);
  EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());
  d.download_outputs(t);
  return d.guard_violations();
}

// A plan with `splits` splits merged by `merge` (decode_config.cuh's arithmetic, as the plan's).
DecodePlan with_splits(DecodePlan plan, int splits, dk::SplitMerge merge) {
  const DecodeProblem& pr = plan.problem;
  const int bn = dk::block_n_for(pr.head_dim, pr.q_per_seq * (pr.heads_q / pr.heads_kv));
  plan.num_splits = splits;
  plan.keys_per_split = dk::split_keys(pr.max_seqlen_k, splits, bn);
  plan.workspace_bytes = merge == dk::SplitMerge::workspace
                             ? dk::workspace_layout(splits, pr.batch, pr.q_per_seq, pr.heads_q, pr.head_dim_v).bytes
                             : 0;
  return plan;
}

std::string plan_path(const DecodePlan& plan) {
  if (plan.num_splits <= 1) return "decode unsplit";
  return plan.workspace_bytes > 0 ? "decode split, workspace + combine kernel" : "decode split, cluster merge";
}

std::string run_decode(const FuzzCase& c, AttentionTensors& t, std::string* path) {
  const DecodeProblem pr = decode_problem(c.spec, DeviceKind::cuda);
  DecodePlan plan = plan_decode(pr);
  Rng rng(c.seed ^ 0x5bd1e995ull);
  switch (rng.uniform_int(0, 3)) {
    case 0: break;  // the plan's own choice
    case 1: plan = with_splits(plan, 1, dk::SplitMerge::none); break;
    case 2: plan = with_splits(plan, rng.uniform_int(2, 7), dk::SplitMerge::workspace); break;
    default: plan = with_splits(plan, 2 << rng.uniform_int(0, 2), sm90_here() ? dk::SplitMerge::cluster : dk::SplitMerge::workspace);
  }
  DeviceProblem d(t);
  const TensorPointers ptrs = d.pointers();
  DecodeArgs args = bind_decode(c.spec, t, DeviceKind::cuda, &ptrs);
  auto run = [&](const DecodePlan& p) {
    void* ws = nullptr;
    if (p.workspace_bytes > 0) EXPECT_EQ(cudaSuccess, cudaMalloc(&ws, p.workspace_bytes));
    args.workspace = ws;
    decode(p, args);
    EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());
    cudaFree(ws);
  };
  try {
    run(plan);
  } catch (const ArgumentError& e) {
    // A cluster larger than this kernel's limit on this device: the same count through the workspace.
    if (plan.num_splits <= 1 || plan.workspace_bytes > 0) throw;
    plan = with_splits(plan, plan.num_splits, dk::SplitMerge::workspace);
    run(plan);
  }
  *path = plan_path(plan) + " (" + std::to_string(plan.num_splits) + ")";
  d.download_outputs(t);
  return d.guard_violations();
}

// Parts from prefill over key slices, merged on the device.
void run_and_check_merge(const FuzzCase& c, const AttentionTensors& t) {
  const ProblemSpec& s = c.spec;
  MergeTensors m(s, c.merge_parts());
  for (int p = 0; p < c.merge_parts(); ++p) {
    const int begin = c.merge_bounds[p], end = c.merge_bounds[p + 1];
    if (begin == end) {
      m.store_empty_part(s, p);
      continue;
    }
    AttentionTensors part = t;
    part.o.poison();
    part.lse.poison();
    EXPECT_EQ(run_prefill(s, part, prefill_backend(c), begin, end), "") << "part " << p << ": device guards overwritten";
    m.store_part(s, p, part);
  }
  DeviceMirror o_parts(m.o_parts), lse_parts(m.lse_parts), o(m.o), lse(m.lse);
  MergeStatesArgs args;
  args.o_parts = m.o_parts.view(DeviceKind::cuda, o_parts.data());
  args.lse_parts = m.lse_parts.view(DeviceKind::cuda, lse_parts.data());
  args.o = m.o.view(DeviceKind::cuda, o.data());
  args.lse = m.lse.view(DeviceKind::cuda, lse.data());
  merge_states(args);
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  o.download(m.o);
  lse.download(m.lse);
  EXPECT_TRUE(o_parts.guards_intact() && lse_parts.guards_intact() && o.guards_intact() && lse.guards_intact())
      << "merge_states: device guards overwritten";
  const DeviceReferences ref = gpu_reference_attention(s, t, all_rows(s));
  const AttentionCheck check = check_merge(s, m, ref.float64);
  EXPECT_TRUE(check.ok) << check.summary();
}

void run_case(FuzzCase& c) {
  SCOPED_TRACE(c.describe());
  Rng rng(c.seed);
  AttentionTensors t = make_tensors(c.spec, rng);
  if (c.nan_in_unused_rows) poison_unused_kv_rows(c.spec, t);
  std::string guards, path;
  switch (c.entry) {
    case FuzzEntry::prefill:
      path = prefill_path(c.spec, prefill_backend(c));
      guards = run_prefill(c.spec, t, prefill_backend(c));
      break;
    case FuzzEntry::decode:
      guards = run_decode(c, t, &path);
      break;
    case FuzzEntry::merge:
      ++coverage()["merge_states of prefill parts"];
      run_and_check_merge(c, t);
      return;
  }
  ++coverage()[path.substr(0, path.find(" ("))];
  EXPECT_EQ(guards, "") << path << ": device guard regions overwritten";
  const AttentionCheck check = gpu_check_attention(c.spec, t);
  EXPECT_TRUE(check.ok) << path << ": " << check.summary();
}

void print_coverage(const char* what) {
  std::printf("[ COVERAGE ] %s:", what);
  for (const auto& [path, n] : coverage()) std::printf(" %s %d;", path.c_str(), n);
  std::printf("\n");
  coverage().clear();
}

class FuzzGpu : public ::testing::TestWithParam<int> {};

TEST_P(FuzzGpu, AgainstFloat64Reference) {
  FLASHBUF_REQUIRE_GPU();
  const FuzzLimits limits = gpu_limits();
  if (limits.head_dims.empty()) GTEST_SKIP() << "no prefill instantiation in this build";
  const std::uint64_t base = fuzz_base_seed(std::getenv("FLASHBUF_FUZZ_SEED"));
  SCOPED_TRACE("fuzz run seed " + std::to_string(base) + " (replay: FLASHBUF_FUZZ_SEED=" + std::to_string(base) + ")");
  int ran = 0;
  for (int n = 0; n < kCasesPerShard; ++n) {
    const int index = GetParam() * kCasesPerShard + n;
    FuzzCase c = make_fuzz_case(index, fuzz_case_seed(base, index), limits);
    if (!built(c)) continue;
    try {
      run_case(c);
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.describe() << ": threw " << e.what();
    }
    ++ran;
    if (::testing::Test::HasFatalFailure()) break;
  }
  std::printf("[ FUZZ     ] shard %d: %d cases run\n", GetParam(), ran);
  print_coverage("shard");
}

INSTANTIATE_TEST_SUITE_P(Shards, FuzzGpu, ::testing::Range(0, kShards));

// Long items: batch-form problems of 2-8k keys, rows sampled. At D 64 with >= 16 key tiles an
// item and >= 4 waves of items the Hopper kernel takes three consumers over 192-row items.
TEST(FuzzGpuLong, LongItemsSampledRows) {
  FLASHBUF_REQUIRE_GPU();
  const std::uint64_t base = fuzz_base_seed(std::getenv("FLASHBUF_FUZZ_SEED"));
  SCOPED_TRACE("fuzz run seed " + std::to_string(base) + " (replay: FLASHBUF_FUZZ_SEED=" + std::to_string(base) + ")");
  const std::pair<int, int> dims[] = {{64, 64}, {128, 128}, {64, 64}, {256, 256}, {192, 128}, {96, 96}};
  int ran = 0;
  for (int n = 0; n < 12; ++n) {
    Rng rng(fuzz_case_seed(base, 100000 + n));
    ProblemSpec s;
    s.dtype = rng.coin() ? DType::bf16 : DType::fp16;
    s.batch = rng.uniform_int(1, 4);
    s.heads_kv = rng.uniform_int(1, 8);
    s.heads_q = s.heads_kv * rng.uniform_int(1, 8);
    s.seqlen_k = rng.uniform_int(2048, 8192);
    s.seqlen_q = rng.coin(0.7) ? rng.uniform_int(s.seqlen_k / 2, s.seqlen_k) : rng.uniform_int(1, 300);
    s.mask = n % 3 == 0 ? Mask::none() : n % 3 == 1 ? Mask::causal() : Mask::window(rng.uniform_int(100, 3000), rng.uniform_int(-1, 500));
    s.softcap = rng.coin(0.3) ? 30.0f : 0.0f;
    std::tie(s.head_dim, s.head_dim_v) = dims[n % 6];
    if (n == 3) {
      // D 64 without a mask, 22 query blocks of 192 rows x 32 heads (>= 4 waves on 132 SMs) of
      // 33 key tiles each, the last block padded by 124 rows: three consumers on Hopper.
      s.head_dim = s.head_dim_v = 64;
      s.batch = 1, s.heads_q = 32, s.heads_kv = 8, s.seqlen_q = s.seqlen_k = 4100;
      s.mask = Mask::none();
    }
    if (!detail::prefill_instantiated(s.dtype, s.head_dim, s.head_dim_v)) s.dtype = s.dtype == DType::bf16 ? DType::fp16 : DType::bf16;
    if (!detail::prefill_instantiated(s.dtype, s.head_dim, s.head_dim_v)) continue;
    // The host fills K and V: at most 2^24 elements each keeps a case to about a second.
    while (std::int64_t(s.batch) * s.seqlen_k * s.heads_kv * std::max(s.head_dim, s.head_dim_v) > (std::int64_t(1) << 24)) {
      if (s.batch > 1) --s.batch;
      else if (s.heads_kv > 1) {
        const int group = s.heads_q / s.heads_kv;
        s.heads_kv /= 2;
        s.heads_q = group * s.heads_kv;
      } else {
        s.seqlen_k /= 2;
        s.seqlen_q = std::min(s.seqlen_q, s.seqlen_k);
      }
    }
    const Backend backend = n % 2 == 1 && sm90_here() ? Backend::sm90 : Backend::sm80;
    SCOPED_TRACE(s.describe() + " on " + backend_name(backend) + " seed " + std::to_string(rng.seed()));
    AttentionTensors t = make_tensors(s, rng);
    EXPECT_EQ(run_prefill(s, t, backend), "") << "device guard regions overwritten";
    EXPECT_TRUE(t.o.fully_written()) << "some output element was never written";
    const std::vector<RowId> rows = sample_rows(s, rng, 3000);
    const AttentionCheck check = gpu_check_attention(s, t, &rows);
    EXPECT_TRUE(check.ok) << check.summary();
    ++coverage()[prefill_path(s, backend) + " (long)"];
    ++ran;
  }
  std::printf("[ FUZZ     ] long items: %d cases run\n", ran);
  print_coverage("long items");
}

// ---- the NaN rule on the GPU -------------------------------------------------------------

// A row that reads a NaN (its query, a key or value it sees) gives NaN O and NaN LSE; the other
// rows match the reference. `edit` puts the NaNs in.
template <class Edit>
void check_nan_rule(const ProblemSpec& spec, bool use_decode, Backend backend, Edit edit) {
  Rng rng(Rng::fresh_seed());
  SCOPED_TRACE(spec.describe() + (use_decode ? " decode" : std::string(" prefill on ") + backend_name(backend)) +
               " seed " + std::to_string(rng.seed()));
  AttentionTensors t = make_tensors(spec, rng);
  edit(t);
  if (use_decode) {
    FuzzCase c;
    c.entry = FuzzEntry::decode;
    c.spec = spec;
    c.seed = rng.seed();
    std::string path;
    EXPECT_EQ(run_decode(c, t, &path), "");
  } else {
    EXPECT_EQ(run_prefill(spec, t, backend), "");
  }
  const NanRows rows = split_rows_by_nan(spec, t);
  ASSERT_FALSE(rows.nan_rows.empty()) << "the case puts a NaN where some row reads it";
  EXPECT_EQ(check_nan_rows(spec, t, rows.nan_rows), "");
  const AttentionCheck clean = gpu_check_attention(spec, t, &rows.clean_rows);
  EXPECT_TRUE(clean.ok) << "rows that read no NaN: " << clean.summary();
}

void set_nan(HostTensor& x, std::initializer_list<std::int64_t> index) {
  x.set(x.offset(index), std::numeric_limits<double>::quiet_NaN());
}

TEST(NanRuleGpu, PrefillQueryKeyValueAndTile) {
  FLASHBUF_REQUIRE_GPU();
  for (const Backend backend : {Backend::sm80, Backend::sm90}) {
    if (backend == Backend::sm90 && !sm90_here()) continue;
    for (const auto& [d, dv] : {std::pair{64, 64}, std::pair{128, 128}}) {
      if (!detail::prefill_instantiated(DType::bf16, d, dv)) continue;
      ProblemSpec s;
      s.batch = 2;
      s.seqlen_q = 130;
      s.seqlen_k = 300;
      s.heads_q = 4;
      s.heads_kv = 2;
      s.head_dim = d;
      s.head_dim_v = dv;
      s.mask = Mask::causal();
      check_nan_rule(s, false, backend, [](AttentionTensors& t) { set_nan(t.q, {1, 3, 2, 17}); });
      // The NaN value sits at a key every query row of sequence 1 sees (row 0 sees keys up to
      // 170): on the GPU a value hidden by the mask but inside a row's key tile reaches the row
      // through 0 * NaN in the tensor cores (docs/errors.md, "NaN and infinity").
      check_nan_rule(s, false, backend, [](AttentionTensors& t) {
        set_nan(t.k, {0, 250, 1, 5});
        set_nan(t.v, {1, 100, 0, 33});
      });
      check_nan_rule(s, false, backend, [d](AttentionTensors& t) {  // a whole 64-key tile
        for (int j = 64; j < 128; ++j)
          for (int c = 0; c < d; ++c) set_nan(t.k, {0, j, 0, c});
      });
    }
  }
}

TEST(NanRuleGpu, Decode) {
  FLASHBUF_REQUIRE_GPU();
  for (int d : {64, 128, 256}) {
    if (!detail::decode_instantiated(DType::bf16, d)) continue;
    ProblemSpec s;
    s.batch = 2;
    s.seqlen_q = 4;
    s.heads_q = 8;
    s.heads_kv = 2;
    s.head_dim = s.head_dim_v = d;
    s.kv = KvLayout::paged;
    s.page_size = 16;
    s.k_lens = {700, 300};
    s.mask = Mask::causal();
    check_nan_rule(s, true, Backend::sm80, [&](AttentionTensors& t) {
      const int page = t.page_table.i32()[1 * s.max_pages() + 5];  // sequence 1, keys 80..95
      for (int c = 0; c < d; ++c) t.v.set(t.v.offset({page, 3, 1, c}), std::numeric_limits<double>::quiet_NaN());
      set_nan(t.q, {0, 2, 5, 7});
    });
  }
}

}  // namespace
}  // namespace flashbuf::reference
