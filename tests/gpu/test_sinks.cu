// GPU tests of attention sinks and of the NaN rule, through the public API on CUDA tensors:
// prefill on the mma.sync kernel (sm80) and the Hopper kernel (sm90: a block per query block,
// and the persistent grid where the launcher takes it), and split-KV decode (unsplit, merged in
// the workspace by the combine, merged in thread-block clusters). Expected values: the float64
// reference (src/reference) without sinks, then each row's sink joined in double on the host:
//     lse' = ln(e^lse + e^sink),  o' = o e^(lse - lse')   (a row with no key: o' = 0, lse' = sink)
// applied to the float64 and the same-precision references alike (the latter's O rounded to the
// dtype again, as the kernel rounds after the sink factor), then the usual acceptance rule
// (check.hpp). Also: paged against contiguous bit-exactly with sinks, rows with no key
// (O = 0, LSE = the sink, exactly), sinks of +-30, GQA (a sink per query head), window 128,
// merge_states of sink-free parts plus the sink as one more part, and a NaN in a query row or a
// visible key giving that row NaN O and NaN LSE (and leaving the other rows as they were).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "api/backends.hpp"
#include "cuda/prefill_grid_knob.hpp"
#include "flashbuf/core/numeric.hpp"
#include "flashbuf/kernels/decode_config.cuh"
#include "gpu_test_util.cuh"
#include "reference/check.hpp"
#include "reference/spec.hpp"

namespace flashbuf::reference {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInfD = std::numeric_limits<double>::infinity();

// A device copy of a HostTensor's storage, with guard bytes on both sides.
class Mirror {
 public:
  static constexpr std::size_t kGuard = 256;
  static constexpr unsigned char kGuardByte = 0x5A;
  explicit Mirror(const HostTensor& t) : bytes_(t.empty() ? 0 : t.storage_bytes()) {
    if (bytes_ == 0) return;
    cudaMalloc(&raw_, bytes_ + 2 * kGuard);
    cudaMemset(raw_, kGuardByte, bytes_ + 2 * kGuard);
    cudaMemcpy(data(), t.data(), bytes_, cudaMemcpyHostToDevice);
  }
  ~Mirror() { cudaFree(raw_); }
  Mirror(const Mirror&) = delete;
  Mirror& operator=(const Mirror&) = delete;
  void* data() const { return raw_ ? static_cast<char*>(raw_) + kGuard : nullptr; }
  void download(HostTensor& t) const {
    if (bytes_) cudaMemcpy(t.data(), data(), bytes_, cudaMemcpyDeviceToHost);
  }
  bool guards_intact() const {
    if (!bytes_) return true;
    std::vector<unsigned char> g(kGuard);
    for (std::size_t off : {std::size_t(0), kGuard + bytes_}) {
      cudaMemcpy(g.data(), static_cast<char*>(raw_) + off, kGuard, cudaMemcpyDeviceToHost);
      for (unsigned char c : g)
        if (c != kGuardByte) return false;
    }
    return true;
  }

 private:
  std::size_t bytes_;
  void* raw_ = nullptr;
};

struct DeviceTensors {
  Mirror q, k, v, o, lse, cu_q, cu_k, seqlens_k, page_table;
  explicit DeviceTensors(const AttentionTensors& t)
      : q(t.q), k(t.k), v(t.v), o(t.o), lse(t.lse), cu_q(t.cu_seqlens_q), cu_k(t.cu_seqlens_k),
        seqlens_k(t.seqlens_k), page_table(t.page_table) {}
  TensorPointers pointers() const {
    return {q.data(), k.data(), v.data(), o.data(), lse.data(), cu_q.data(), cu_k.data(), seqlens_k.data(),
            page_table.data()};
  }
  bool guards_intact() const {
    for (const Mirror* m : {&q, &k, &v, &o, &lse, &cu_q, &cu_k, &seqlens_k, &page_table})
      if (!m->guards_intact()) return false;
    return true;
  }
  void download_outputs(AttentionTensors& t) const {
    o.download(t.o);
    if (!t.lse.empty()) lse.download(t.lse);
  }
};

// The sinks on the device (one float per query head) and their view; empty: no sinks.
class DeviceSinks {
 public:
  explicit DeviceSinks(const std::vector<float>& host) : count_(host.size()) {
    if (host.empty()) return;
    cudaMalloc(&ptr_, host.size() * sizeof(float));
    cudaMemcpy(ptr_, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice);
  }
  ~DeviceSinks() { cudaFree(ptr_); }
  DeviceSinks(const DeviceSinks&) = delete;
  DeviceSinks& operator=(const DeviceSinks&) = delete;
  TensorView view() const {
    TensorView v;
    if (ptr_ == nullptr) return v;
    v.data = ptr_;
    v.dtype = DType::fp32;
    v.rank = 1;
    v.shape[0] = static_cast<std::int64_t>(count_);
    v.stride[0] = 1;
    v.device = DeviceKind::cuda;
    v.device_index = 0;
    return v;
  }

 private:
  std::size_t count_;
  float* ptr_ = nullptr;
};

std::vector<float> random_sinks(int heads, Rng& rng, double lo, double hi) {
  std::vector<float> s(heads);
  for (float& x : s) x = static_cast<float>(rng.uniform(lo, hi));
  return s;
}

// Sinks far above and below a row's own LSE, and at the formula's limits: a head's sink is
// 30, -30, +inf (all the weight: O = 0, LSE = +inf) or -inf (adds nothing), in turn.
std::vector<float> extreme_sinks(int heads) {
  const float cycle[4] = {30.0f, -30.0f, static_cast<float>(kInfD), static_cast<float>(-kInfD)};
  std::vector<float> s(heads);
  for (int h = 0; h < heads; ++h) s[h] = cycle[h % 4];
  return s;
}

// Prefill of `spec` on the GPU with `sinks`; o and lse come back into t. False: guards hit.
bool run_prefill(const ProblemSpec& spec, AttentionTensors& t, Backend backend, const std::vector<float>& sinks) {
  DeviceTensors d(t);
  DeviceSinks ds(sinks);
  const TensorPointers ptrs = d.pointers();
  AttentionArgs args = bind(spec, t, DeviceKind::cuda, &ptrs);
  args.backend = backend;
  args.sinks = ds.view();
  const Backend ran = attention(args);
  EXPECT_EQ(ran, backend);
  EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());
  d.download_outputs(t);
  return d.guards_intact();
}

namespace dk = flashbuf::kernels::decode;
using Merge = dk::SplitMerge;

// How a decode run merges its splits: 0 splits = the plan's own choice.
struct SplitRun {
  int splits = 0;
  Merge merge = Merge::workspace;
  std::string describe() const {
    return "splits " + std::to_string(splits) + (splits > 1 && merge == Merge::cluster ? " (cluster)" : "");
  }
};

enum class DecodeOutcome { ran, no_cluster };

// Decode of `spec` (a decode shape) on the GPU; `run` forces the splits and their merge. A
// cluster merge the device or build cannot take is reported, not failed.
DecodeOutcome run_decode(const ProblemSpec& spec, AttentionTensors& t, SplitRun run, const std::vector<float>& sinks) {
  DecodePlan plan = plan_decode(decode_problem(spec, DeviceKind::cuda));
  if (run.splits > 0) {
    const DecodeProblem& pr = plan.problem;
    const int bn = dk::block_n_for(pr.head_dim, pr.q_per_seq * (pr.heads_q / pr.heads_kv));
    plan.num_splits = run.splits;
    plan.keys_per_split = dk::split_keys(pr.max_seqlen_k, run.splits, bn);
    plan.workspace_bytes =
        run.merge == Merge::cluster && run.splits > 1
            ? 0
            : dk::workspace_layout(run.splits, pr.batch, pr.q_per_seq, pr.heads_q, pr.head_dim_v).bytes;
  }
  DeviceTensors d(t);
  DeviceSinks ds(sinks);
  void* workspace = nullptr;
  if (plan.workspace_bytes > 0) {
    cudaMalloc(&workspace, plan.workspace_bytes);
    cudaMemset(workspace, 0xFF, plan.workspace_bytes);  // NaN everywhere: unwritten parts would show
  }
  const TensorPointers ptrs = d.pointers();
  DecodeArgs args = bind_decode(spec, t, DeviceKind::cuda, &ptrs);
  args.sinks = ds.view();
  args.workspace = workspace;
  DecodeOutcome outcome = DecodeOutcome::ran;
  try {
    decode(plan, args);
  } catch (const ArgumentError& e) {
    if (e.argument() != "plan.workspace_bytes") {
      cudaFree(workspace);
      throw;
    }
    outcome = DecodeOutcome::no_cluster;  // this device / build has no cluster merge of that size
  }
  EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());
  cudaFree(workspace);
  if (outcome == DecodeOutcome::ran) {
    d.download_outputs(t);
    EXPECT_TRUE(d.guards_intact()) << "device guard regions overwritten";
  }
  return outcome;
}

std::int64_t row_index(const ProblemSpec& spec, const RowId& r) { return spec.q_row(r.b, r.i) * spec.heads_q + r.h; }

// The value a kernel stores for fp32 x in the output dtype (round to nearest even).
double round_to_output(DType dtype, double x) {
  const float f = static_cast<float>(x);
  switch (dtype) {
    case DType::bf16: return bf16_to_float(float_to_bf16(f));
    case DType::fp16: return fp16_to_float(float_to_fp16(f));
    default: return f;
  }
}

// Joins each row's sink to reference results, in double. `rows` may name a row more than once
// (sample_rows draws with replacement): each distinct row is joined once. `round_output` rounds
// the joined O to the output dtype again, as the same-precision reference rounds its own O (and
// as the kernel rounds after applying the sink factor).
void join_sinks(const ProblemSpec& spec, const std::vector<RowId>& rows, const std::vector<float>& sinks,
                bool round_output, RowResults& r) {
  if (sinks.empty()) return;
  std::vector<char> joined(r.lse.size(), 0);
  for (const RowId& id : rows) {
    const std::int64_t n = row_index(spec, id);
    if (joined[n]) continue;
    joined[n] = 1;
    const double factor = join_sink(r.lse[n], sinks[id.h], r.lse[n]);
    for (int c = 0; c < spec.head_dim_v; ++c) {
      double& o = r.o[n * spec.head_dim_v + c];
      o *= factor;
      if (round_output) o = round_to_output(spec.dtype, o);
    }
  }
}

// The float64 and same-precision references of `rows` with the sinks joined: computed once per
// inputs, compared with every run over them.
struct Expected {
  std::vector<RowId> rows;
  RowResults ref, low;
};
Expected expected_with_sinks(const ProblemSpec& spec, const AttentionTensors& t, std::vector<RowId> rows,
                             const std::vector<float>& sinks) {
  Expected e{std::move(rows), {}, {}};
  e.ref = reference_attention(spec, t, e.rows, Precision::float64);
  e.low = reference_attention(spec, t, e.rows, Precision::lowp);
  join_sinks(spec, e.rows, sinks, /*round_output=*/false, e.ref);
  join_sinks(spec, e.rows, sinks, /*round_output=*/true, e.low);
  return e;
}

// One line a comparison, "[ sinks error ] <path> | o <err> <bound> | lse <err> <bound>", from
// which scripts/gpu/sinks.sh tabulates the largest error per path (the test, and for decode
// its split run) against the float64 reference.
void report_error(const std::string& path, const Comparison& o, const Comparison* lse) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::printf("[ sinks error ] %s.%s%s%s | o %.3e %.3e | lse %.3e %.3e\n", test->test_suite_name(), test->name(),
              path.empty() ? "" : " ", path.c_str(), o.max_abs_err, o.bound, lse ? lse->max_abs_err : 0.0,
              lse ? lse->bound : 0.0);
}

// t's output (after a run) against the references, under check.hpp's rule; `path` names the
// run in the error report (decode: its splits).
::testing::AssertionResult matches(const ProblemSpec& spec, const AttentionTensors& t, const Expected& e,
                                   const std::string& path = "") {
  const RowResults out = gather_output(spec, t, e.rows);
  const Comparison o = compare(out.o, e.ref.o, e.low.o, default_atol(spec.dtype), "o");
  Comparison l;
  if (spec.lse) l = compare(out.lse, e.ref.lse, e.low.lse, kLseAtol, "lse");
  report_error(path, o, spec.lse ? &l : nullptr);
  if (!o.ok) return ::testing::AssertionFailure() << o.detail;
  if (!l.ok) return ::testing::AssertionFailure() << l.detail;
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult matches_reference(const ProblemSpec& spec, const AttentionTensors& t,
                                             const std::vector<RowId>& rows, const std::vector<float>& sinks) {
  return matches(spec, t, expected_with_sinks(spec, t, rows, sinks));
}

std::vector<RowId> rows_to_check(const ProblemSpec& spec, Rng& rng, int max_rows) {
  std::vector<RowId> rows = all_rows(spec);
  if (static_cast<int>(rows.size()) > max_rows) rows = sample_rows(spec, rng, max_rows);
  return rows;
}

ProblemSpec prefill_spec(int d, int sq, int sk, Mask mask = Mask::none()) {
  ProblemSpec s;
  s.dtype = DType::bf16;
  s.head_dim = d;
  s.head_dim_v = d;
  s.batch = 2;
  s.seqlen_q = sq;
  s.seqlen_k = sk;
  s.heads_q = 8;
  s.heads_kv = 2;
  s.mask = mask;
  return s;
}

ProblemSpec decode_spec(int d, int q_per_seq, std::vector<int> lens, int hq, int hkv, int page = 0) {
  ProblemSpec s;
  s.dtype = DType::bf16;
  s.head_dim = d;
  s.head_dim_v = d;
  s.batch = static_cast<int>(lens.size());
  s.seqlen_q = q_per_seq;
  s.seqlen_k = *std::max_element(lens.begin(), lens.end()) + 7;
  s.k_lens = std::move(lens);
  s.heads_q = hq;
  s.heads_kv = hkv;
  if (page > 0) {
    s.kv = KvLayout::paged;
    s.page_size = page;
  } else {
    s.use_seqlens_k = true;
  }
  return s;
}

bool prefill_built(const ProblemSpec& s) { return detail::prefill_instantiated(s.dtype, s.head_dim, s.head_dim_v); }
bool decode_built(const ProblemSpec& s) { return detail::decode_instantiated(s.dtype, s.head_dim); }

// The bf16 head dims of this build among those the tests try.
std::vector<int> built_head_dims(bool decode) {
  std::vector<int> dims;
  for (int d : {64, 128, 256}) {
    ProblemSpec s = prefill_spec(d, 1, 1);
    if (decode ? decode_built(s) : prefill_built(s)) dims.push_back(d);
  }
  return dims;
}

// ---- prefill -----------------------------------------------------------------------------

class SinksPrefill : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    FLASHBUF_REQUIRE_GPU();
    if (GetParam() == Backend::sm90 && !detail::sm90_prefill_available(0))
      GTEST_SKIP() << "the Hopper kernel needs compute capability 9.0 and sm_90a code";
  }
  Backend backend() const { return GetParam(); }

  // Fresh inputs and sinks, one GPU run, the reference check (a row sample for big problems).
  void check(const ProblemSpec& spec, double sink_lo, double sink_hi, int max_rows = 400) {
    spec.check();
    Rng rng(Rng::fresh_seed());
    SCOPED_TRACE(spec.describe() + " on " + backend_name(backend()) + " seed " + std::to_string(rng.seed()));
    AttentionTensors t = make_tensors(spec, rng);
    const std::vector<float> sinks = random_sinks(spec.heads_q, rng, sink_lo, sink_hi);
    ASSERT_TRUE(run_prefill(spec, t, backend(), sinks)) << "device guard regions overwritten";
    ASSERT_TRUE(t.o.fully_written() || spec.total_q() == 0) << "some output element was never written";
    EXPECT_TRUE(matches_reference(spec, t, rows_to_check(spec, rng, max_rows), sinks));
  }
};

std::string backend_param_name(const ::testing::TestParamInfo<Backend>& info) { return backend_name(info.param); }

// Every mask, odd sizes, GQA, softcap; sinks around the scores' own LSE range.
TEST_P(SinksPrefill, AgainstReference) {
  const std::vector<int> dims = built_head_dims(false);
  if (dims.empty()) GTEST_SKIP() << "no bf16 prefill head dim of 64, 128 or 256 is built";
  for (int d : dims) {
    for (Mask mask : {Mask::none(), Mask::causal(), Mask::window(37, 5)}) {
      check(prefill_spec(d, 77, 301, mask), -4.0, 8.0);
      check(prefill_spec(d, 300, 300, mask), -4.0, 8.0);
    }
    ProblemSpec capped = prefill_spec(d, 130, 257, Mask::causal());
    capped.softcap = 15.0f;
    check(capped, -2.0, 4.0);
  }
}

// gpt-oss: sinks with a 128-token sliding window (causal, left 128), 8 query heads a KV head.
TEST_P(SinksPrefill, Window128GptOss) {
  const std::vector<int> dims = built_head_dims(false);
  if (dims.empty()) GTEST_SKIP() << "no bf16 prefill head dim of 64, 128 or 256 is built";
  ProblemSpec s = prefill_spec(dims.front(), 700, 700, Mask::window(128, 0));
  s.heads_q = 16;
  s.heads_kv = 2;
  check(s, -1.0, 5.0);
}

// Sinks of +-30: the sink far above every score (O ~ e^(lse - 30) O, LSE ~ 30) and far below
// (O and LSE as without the sink); and of +-inf (extreme_sinks).
TEST_P(SinksPrefill, ExtremeSinks) {
  const std::vector<int> dims = built_head_dims(false);
  if (dims.empty()) GTEST_SKIP() << "no bf16 prefill head dim of 64, 128 or 256 is built";
  Rng rng(Rng::fresh_seed());
  SCOPED_TRACE("seed " + std::to_string(rng.seed()));
  ProblemSpec s = prefill_spec(dims.front(), 65, 200, Mask::causal());
  AttentionTensors t = make_tensors(s, rng);
  const std::vector<float> sinks = extreme_sinks(s.heads_q);
  ASSERT_TRUE(run_prefill(s, t, backend(), sinks));
  EXPECT_TRUE(matches_reference(s, t, all_rows(s), sinks));
}

// Varlen (zero-length sequences included) and paged K/V, with sinks.
TEST_P(SinksPrefill, VarlenAndPaged) {
  const std::vector<int> dims = built_head_dims(false);
  if (dims.empty()) GTEST_SKIP() << "no bf16 prefill head dim of 64, 128 or 256 is built";
  Rng rng(Rng::fresh_seed());
  for (Mask mask : {Mask::none(), Mask::causal()}) {
    ProblemSpec v = prefill_spec(dims.front(), 1, 1, mask);
    v.batch = 5;
    v.varlen_q = true;
    v.kv = KvLayout::varlen;
    randomize_lengths(v, rng, 0, 150, 0, 250);
    check(v, -3.0, 6.0);
    ProblemSpec p = prefill_spec(dims.front(), 90, 333, mask);
    p.kv = KvLayout::paged;
    p.page_size = 16;
    p.k_lens = {333, 41};
    check(p, -3.0, 6.0);
  }
}

// Many batch-form items: on Hopper the persistent grid (two consumers; D 64 over long
// unmasked items: three), each block walking several items through the same epilogue.
TEST_P(SinksPrefill, PersistentGridItems) {
  const std::vector<int> dims = built_head_dims(false);
  if (dims.empty()) GTEST_SKIP() << "no bf16 prefill head dim of 64, 128 or 256 is built";
  for (int d : dims) {
    for (Mask mask : {Mask::none(), Mask::causal()}) {
      ProblemSpec s = prefill_spec(d, 300, 500, mask);
      s.batch = 8;
      check(s, -2.0, 6.0, 300);
    }
  }
  if (std::find(dims.begin(), dims.end(), 64) != dims.end()) {
    ProblemSpec s = prefill_spec(64, 2048, 2048);
    s.batch = 4;
    check(s, -2.0, 6.0, 300);
  }
}

// Rows with no visible key (bottom-right causal with Sq > Sk, and empty sequences): O = 0 and
// LSE = the head's sink, exactly.
TEST_P(SinksPrefill, RowsWithoutKeysGetTheSink) {
  const std::vector<int> dims = built_head_dims(false);
  if (dims.empty()) GTEST_SKIP() << "no bf16 prefill head dim of 64, 128 or 256 is built";
  Rng rng(Rng::fresh_seed());
  SCOPED_TRACE("seed " + std::to_string(rng.seed()));
  ProblemSpec s = prefill_spec(dims.front(), 100, 40, Mask::causal());  // rows 0..59 see no key
  AttentionTensors t = make_tensors(s, rng);
  std::vector<float> sinks = random_sinks(s.heads_q, rng, -30.0, 30.0);
  sinks[0] = static_cast<float>(-kInfD);  // adds nothing: these rows get O = 0, LSE = -inf
  sinks[1] = static_cast<float>(kInfD);   // takes all: every row of the head gets O = 0, LSE = +inf
  ASSERT_TRUE(run_prefill(s, t, backend(), sinks));
  int bad = 0;
  for (int b = 0; b < s.batch; ++b)
    for (int i = 0; i < s.seqlen_q - s.seqlen_k; ++i)
      for (int h = 0; h < s.heads_q; ++h) {
        if (t.lse.at({b, h, i}) != static_cast<double>(sinks[h])) ++bad;
        for (int c = 0; c < s.head_dim_v; ++c)
          if (t.o.at({b, i, h, c}) != 0.0) ++bad;
      }
  EXPECT_EQ(bad, 0) << bad << " elements of rows without keys differ from O = 0, LSE = sink";
  EXPECT_TRUE(matches_reference(s, t, all_rows(s), sinks));
}

// Paged and contiguous K/V hold the same keys: with sinks the outputs stay bit-identical. The
// sizes are test_prefill.cu's: D 64 (whose persistent and per-block tiles are the same) and
// D 256 with keys enough that the contiguous run keeps a block per query block, whose tiles
// paged K/V always take (not with the persistent grid forced: then D 64 only).
TEST_P(SinksPrefill, PagedMatchesContiguousBitExactly) {
  const std::vector<int> built = built_head_dims(false);
  std::vector<int> dims;
  for (int d : {64, 256})
    if (std::find(built.begin(), built.end(), d) != built.end()) dims.push_back(d);
  if (backend() == Backend::sm90 && detail::persistent_grid_knob().forced) dims.erase(std::remove(dims.begin(), dims.end(), 256), dims.end());
  if (dims.empty()) GTEST_SKIP() << "neither bf16 prefill head dim 64 nor 256 is built (or the persistent grid is forced)";
  for (int d : dims) {
    Rng rng(Rng::fresh_seed());
    SCOPED_TRACE("D " + std::to_string(d) + " seed " + std::to_string(rng.seed()));
    ProblemSpec contiguous = prefill_spec(d, 150, d > 128 ? 2400 : 700, Mask::causal());
    AttentionTensors a = make_tensors(contiguous, rng);
    const std::vector<float> sinks = random_sinks(contiguous.heads_q, rng, -3.0, 6.0);
    ASSERT_TRUE(run_prefill(contiguous, a, backend(), sinks));
    for (int page : {1, 16, 64}) {
      ProblemSpec paged = contiguous;
      paged.kv = KvLayout::paged;
      paged.page_size = page;
      Rng rng2(rng.seed() + page);
      AttentionTensors b = make_tensors(paged, rng2);
      copy_to_paged(a, paged, b);  // the same q and keys
      ASSERT_TRUE(run_prefill(paged, b, backend(), sinks));
      for (std::int64_t i = 0; i < a.o.numel(); ++i)
        ASSERT_EQ(a.o.get(a.o.logical_to_storage(i)), b.o.get(b.o.logical_to_storage(i))) << "page " << page << " o element " << i;
      for (std::int64_t i = 0; i < a.lse.numel(); ++i)
        ASSERT_EQ(a.lse.get(a.lse.logical_to_storage(i)), b.lse.get(b.lse.logical_to_storage(i))) << "page " << page << " lse element " << i;
    }
  }
}

// merge_states of parts computed without sinks, plus the sink as one more part (o = 0,
// lse = sink), is attention with sinks over all the keys: merge_states itself stays sink-free.
TEST_P(SinksPrefill, MergeOfSinkFreePartsPlusSinkPart) {
  const std::vector<int> dims = built_head_dims(false);
  if (dims.empty()) GTEST_SKIP() << "no bf16 prefill head dim of 64, 128 or 256 is built";
  const int d = dims.front();
  Rng rng(Rng::fresh_seed());
  SCOPED_TRACE("seed " + std::to_string(rng.seed()));
  ProblemSpec whole = prefill_spec(d, 50, 400);
  whole.batch = 1;
  AttentionTensors w = make_tensors(whole, rng);
  const std::vector<float> sinks = random_sinks(whole.heads_q, rng, -2.0, 6.0);
  ASSERT_TRUE(run_prefill(whole, w, backend(), sinks));

  // Parts 0 and 1: the two halves of the keys, without sinks; part 2: the sink.
  const int sq = whole.seqlen_q, hq = whole.heads_q, half = whole.seqlen_k / 2;
  const std::int64_t part_elems = std::int64_t(sq) * hq * d;
  std::vector<std::uint16_t> o_parts(3 * part_elems, 0);  // part 2's o: zeros (bf16 +0)
  std::vector<float> lse_parts(3 * std::int64_t(sq) * hq);
  for (int part = 0; part < 2; ++part) {
    ProblemSpec hs = whole;
    hs.seqlen_k = half;
    Rng unused(1);
    AttentionTensors h = make_tensors(hs, unused);
    for (std::int64_t i = 0; i < w.q.numel(); ++i) h.q.set(h.q.logical_to_storage(i), w.q.get(w.q.logical_to_storage(i)));
    for (int j = 0; j < half; ++j)
      for (int g = 0; g < whole.heads_kv; ++g)
        for (int c = 0; c < d; ++c) {
          h.k.set(h.k.offset({0, j, g, c}), w.k.at({0, part * half + j, g, c}));
          h.v.set(h.v.offset({0, j, g, c}), w.v.at({0, part * half + j, g, c}));
        }
    ASSERT_TRUE(run_prefill(hs, h, backend(), {}));
    for (int i = 0; i < sq; ++i)
      for (int hh = 0; hh < hq; ++hh) {
        lse_parts[(std::int64_t(part) * sq + i) * hq + hh] = static_cast<float>(h.lse.at({0, hh, i}));
        for (int c = 0; c < d; ++c) {
          const std::int64_t at = ((std::int64_t(part) * sq + i) * hq + hh) * d + c;
          o_parts[at] = static_cast<const std::uint16_t*>(h.o.data())[h.o.offset({0, i, hh, c})];
        }
      }
  }
  for (int i = 0; i < sq; ++i)
    for (int hh = 0; hh < hq; ++hh) lse_parts[(2 * std::int64_t(sq) + i) * hq + hh] = sinks[hh];

  std::uint16_t* d_parts = nullptr;
  float* d_lse_parts = nullptr;
  std::uint16_t* d_o = nullptr;
  float* d_lse = nullptr;
  cudaMalloc(&d_parts, o_parts.size() * 2);
  cudaMalloc(&d_lse_parts, lse_parts.size() * 4);
  cudaMalloc(&d_o, part_elems * 2);
  cudaMalloc(&d_lse, std::int64_t(sq) * hq * 4);
  cudaMemcpy(d_parts, o_parts.data(), o_parts.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(d_lse_parts, lse_parts.data(), lse_parts.size() * 4, cudaMemcpyHostToDevice);
  auto view = [](void* data, DType dt, std::vector<std::int64_t> shape) {
    TensorView v;
    v.data = data;
    v.dtype = dt;
    v.rank = static_cast<int>(shape.size());
    std::int64_t stride = 1;
    for (int i = v.rank - 1; i >= 0; --i) {
      v.shape[i] = shape[i];
      v.stride[i] = stride;
      stride *= shape[i];
    }
    v.device = DeviceKind::cuda;
    v.device_index = 0;
    return v;
  };
  MergeStatesArgs m;
  m.o_parts = view(d_parts, DType::bf16, {3, sq, hq, d});
  m.lse_parts = view(d_lse_parts, DType::fp32, {3, sq, hq});
  m.o = view(d_o, DType::bf16, {sq, hq, d});
  m.lse = view(d_lse, DType::fp32, {sq, hq});
  merge_states(m);
  EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());
  std::vector<std::uint16_t> merged(part_elems);
  std::vector<float> merged_lse(std::int64_t(sq) * hq);
  cudaMemcpy(merged.data(), d_o, merged.size() * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(merged_lse.data(), d_lse, merged_lse.size() * 4, cudaMemcpyDeviceToHost);
  cudaFree(d_parts);
  cudaFree(d_lse_parts);
  cudaFree(d_o);
  cudaFree(d_lse);

  // The merged result against the one-call result with sinks: within two bf16 output roundings.
  const double atol = 2 * default_atol(DType::bf16);
  double max_o = 0, max_lse = 0;
  for (int i = 0; i < sq; ++i)
    for (int hh = 0; hh < hq; ++hh) {
      max_lse = std::max(max_lse, std::fabs(merged_lse[std::int64_t(i) * hq + hh] - w.lse.at({0, hh, i})));
      for (int c = 0; c < d; ++c) {
        const double x = bf16_to_float(merged[(std::int64_t(i) * hq + hh) * d + c]);
        max_o = std::max(max_o, std::fabs(x - w.o.at({0, i, hh, c})));
      }
    }
  EXPECT_LE(max_o, atol) << "merged O differs from attention with sinks by " << max_o;
  EXPECT_LE(max_lse, 1e-4) << "merged LSE differs from attention with sinks by " << max_lse;
}

// ---- the NaN rule ---------------------------------------------------------------------------

// Rows (b, i, h) expected NaN: O all NaN and LSE NaN; every other row against the reference.
::testing::AssertionResult nan_rows_and_the_rest(const ProblemSpec& spec, const AttentionTensors& t,
                                                 const std::function<bool(const RowId&)>& is_nan_row,
                                                 const std::vector<float>& sinks) {
  std::vector<RowId> rest;
  int nan_rows = 0, wrong = 0;
  std::string first_wrong;
  const RowResults out = gather_output(spec, t, all_rows(spec));
  for (const RowId& id : all_rows(spec)) {
    if (!is_nan_row(id)) {
      rest.push_back(id);
      continue;
    }
    ++nan_rows;
    const std::int64_t n = row_index(spec, id);
    bool all_nan = std::isnan(out.lse[n]);
    for (int c = 0; c < spec.head_dim_v; ++c) all_nan = all_nan && std::isnan(out.o[n * spec.head_dim_v + c]);
    if (!all_nan && wrong++ == 0) {
      first_wrong = "b " + std::to_string(id.b) + " i " + std::to_string(id.i) + " h " + std::to_string(id.h) +
                    ": lse " + std::to_string(out.lse[n]) + ", o[0] " + std::to_string(out.o[n * spec.head_dim_v]);
    }
  }
  if (nan_rows == 0) return ::testing::AssertionFailure() << "the case has no NaN row";
  if (wrong > 0) {
    return ::testing::AssertionFailure() << wrong << " of " << nan_rows
                                         << " rows that read a NaN are not all-NaN (O and LSE); first: " << first_wrong;
  }
  return matches_reference(spec, t, rest, sinks);
}

TEST_P(SinksPrefill, NaNQueryOrKeyGivesNaNRow) {
  const std::vector<int> dims = built_head_dims(false);
  if (dims.empty()) GTEST_SKIP() << "no bf16 prefill head dim of 64, 128 or 256 is built";
  Rng rng(Rng::fresh_seed());
  SCOPED_TRACE("seed " + std::to_string(rng.seed()));
  for (bool with_sinks : {false, true}) {
    SCOPED_TRACE(with_sinks ? "with sinks" : "without sinks");
    // A NaN query element: that row only.
    ProblemSpec s = prefill_spec(dims.front(), 70, 150, Mask::causal());
    AttentionTensors t = make_tensors(s, rng);
    t.q.set(t.q.offset({1, 33, 5, 7}), kNaN);
    const std::vector<float> sinks = with_sinks ? random_sinks(s.heads_q, rng, -2.0, 4.0) : std::vector<float>{};
    ASSERT_TRUE(run_prefill(s, t, backend(), sinks));
    EXPECT_TRUE(nan_rows_and_the_rest(s, t, [](const RowId& r) { return r.b == 1 && r.i == 33 && r.h == 5; }, sinks));

    // A NaN in key 100 of sequence 0, KV head 1: the rows of its query heads that see key 100
    // (bottom-right causal: query i sees keys <= i + 80).
    AttentionTensors t2 = make_tensors(s, rng);
    t2.k.set(t2.k.offset({0, 100, 1, 3}), kNaN);
    ASSERT_TRUE(run_prefill(s, t2, backend(), sinks));
    const int group = s.heads_q / s.heads_kv, shift = s.seqlen_k - s.seqlen_q;
    EXPECT_TRUE(nan_rows_and_the_rest(
        s, t2, [&](const RowId& r) { return r.b == 0 && r.h / group == 1 && r.i + shift >= 100; }, sinks));
  }
  // A NaN sink is read by every row of its head, rows without keys included (causal 100 x 40).
  ProblemSpec s = prefill_spec(dims.front(), 100, 40, Mask::causal());
  AttentionTensors t = make_tensors(s, rng);
  std::vector<float> sinks = random_sinks(s.heads_q, rng, -2.0, 4.0);
  sinks[3] = static_cast<float>(kNaN);
  ASSERT_TRUE(run_prefill(s, t, backend(), sinks));
  EXPECT_TRUE(nan_rows_and_the_rest(s, t, [](const RowId& r) { return r.h == 3; }, sinks));
}

INSTANTIATE_TEST_SUITE_P(Kernels, SinksPrefill, ::testing::Values(Backend::sm80, Backend::sm90), backend_param_name);

// ---- decode --------------------------------------------------------------------------------

const SplitRun kSplitRuns[] = {SplitRun{1}, SplitRun{3}, SplitRun{7}, SplitRun{3, Merge::cluster},
                               SplitRun{7, Merge::cluster}};

class SinksDecode : public ::testing::Test {
 protected:
  void SetUp() override { FLASHBUF_REQUIRE_GPU(); }

  // One spec under every split run, against the reference with sinks. Returns the runs that ran.
  int check_runs(const ProblemSpec& spec, double sink_lo, double sink_hi) {
    spec.check();
    if (!decode_built(spec)) return 0;
    Rng rng(Rng::fresh_seed());
    SCOPED_TRACE(spec.describe() + " seed " + std::to_string(rng.seed()));
    AttentionTensors t = make_tensors(spec, rng);
    const std::vector<float> sinks = random_sinks(spec.heads_q, rng, sink_lo, sink_hi);
    const Expected expected = expected_with_sinks(spec, t, all_rows(spec), sinks);
    int ran = 0;
    for (const SplitRun run : kSplitRuns) {
      SCOPED_TRACE(run.describe());
      t.o.poison();
      t.lse.poison();
      if (run_decode(spec, t, run, sinks) != DecodeOutcome::ran) continue;
      ++ran;
      EXPECT_TRUE(matches(spec, t, expected, run.describe()));
    }
    return ran;
  }
};

// GQA (8 query heads a KV head, each with its own sink), 1 and 4 query tokens (causal among
// them), sliding window 128, softcap, contiguous and paged caches, sequences of 0 and 1 keys.
TEST_F(SinksDecode, AgainstReference) {
  const std::vector<int> dims = built_head_dims(true);
  if (dims.empty()) GTEST_SKIP() << "no bf16 decode head dim of 64, 128 or 256 is built";
  for (int d : dims) {
    for (int page : {0, 16}) {
      for (int t : {1, 4}) {
        ProblemSpec s = decode_spec(d, t, {900, 0, 1, 333}, 32, 4, page);
        s.mask = t > 1 ? Mask::causal() : Mask::none();
        check_runs(s, -3.0, 8.0);
        ProblemSpec w = s;
        w.mask = Mask::window(128, 0);
        check_runs(w, -3.0, 8.0);
      }
      ProblemSpec capped = decode_spec(d, 2, {700, 65}, 16, 2, page);
      capped.softcap = 20.0f;
      capped.mask = Mask::causal();
      check_runs(capped, -2.0, 5.0);
    }
  }
}

TEST_F(SinksDecode, ExtremeSinksAndRowsWithoutKeys) {
  const std::vector<int> dims = built_head_dims(true);
  if (dims.empty()) GTEST_SKIP() << "no bf16 decode head dim of 64, 128 or 256 is built";
  Rng rng(Rng::fresh_seed());
  SCOPED_TRACE("seed " + std::to_string(rng.seed()));
  ProblemSpec s = decode_spec(dims.front(), 1, {1000, 0, 17}, 8, 2);
  AttentionTensors t = make_tensors(s, rng);
  const std::vector<float> sinks = extreme_sinks(s.heads_q);
  const Expected expected = expected_with_sinks(s, t, all_rows(s), sinks);
  for (const SplitRun run : kSplitRuns) {
    SCOPED_TRACE(run.describe());
    t.o.poison();
    t.lse.poison();
    if (run_decode(s, t, run, sinks) != DecodeOutcome::ran) continue;
    EXPECT_TRUE(matches(s, t, expected, run.describe()));
    int bad = 0;  // sequence 1 has no key: O = 0, LSE = the sink, exactly
    for (int h = 0; h < s.heads_q; ++h) {
      if (t.lse.at({1, h, 0}) != static_cast<double>(sinks[h])) ++bad;
      for (int c = 0; c < s.head_dim_v; ++c)
        if (t.o.at({1, 0, h, c}) != 0.0) ++bad;
    }
    EXPECT_EQ(bad, 0) << bad << " elements of rows without keys differ from O = 0, LSE = sink";
  }
}

// Paged and contiguous caches with the same keys and the same plan: identical bits, sinks on.
TEST_F(SinksDecode, PagedMatchesContiguousBitExactly) {
  const std::vector<int> dims = built_head_dims(true);
  if (dims.empty()) GTEST_SKIP() << "no bf16 decode head dim of 64, 128 or 256 is built";
  Rng rng(Rng::fresh_seed());
  SCOPED_TRACE("seed " + std::to_string(rng.seed()));
  const std::vector<int> lens = {1200, 5, 640};
  ProblemSpec contiguous = decode_spec(dims.front(), 2, lens, 16, 2);
  contiguous.seqlen_k = 1200;  // the capacity the paged plan gets (its longest sequence): one plan
  AttentionTensors a = make_tensors(contiguous, rng);
  const std::vector<float> sinks = random_sinks(contiguous.heads_q, rng, -3.0, 6.0);
  for (const SplitRun run : {SplitRun{1}, SplitRun{4}, SplitRun{4, Merge::cluster}}) {
    SCOPED_TRACE(run.describe());
    if (run_decode(contiguous, a, run, sinks) != DecodeOutcome::ran) continue;
    const ProblemSpec paged = decode_spec(dims.front(), 2, lens, 16, 2, 16);
    Rng rng2(rng.seed() + 1);
    AttentionTensors b = make_tensors(paged, rng2);
    copy_to_paged(a, paged, b);  // the same q and keys
    ASSERT_EQ(decode_problem(paged, DeviceKind::cuda).max_seqlen_k, decode_problem(contiguous, DeviceKind::cuda).max_seqlen_k);
    ASSERT_EQ(run_decode(paged, b, run, sinks), DecodeOutcome::ran);
    for (std::int64_t i = 0; i < a.o.numel(); ++i)
      ASSERT_EQ(a.o.get(a.o.logical_to_storage(i)), b.o.get(b.o.logical_to_storage(i))) << "o element " << i;
    for (std::int64_t i = 0; i < a.lse.numel(); ++i)
      ASSERT_EQ(a.lse.get(a.lse.logical_to_storage(i)), b.lse.get(b.lse.logical_to_storage(i))) << "lse element " << i;
  }
}

// Split against unsplit with sinks: each against the reference (the sink is counted once, not
// once per split, or the split runs would miss it by a factor) and near each other.
TEST_F(SinksDecode, SplitMatchesUnsplit) {
  const std::vector<int> dims = built_head_dims(true);
  if (dims.empty()) GTEST_SKIP() << "no bf16 decode head dim of 64, 128 or 256 is built";
  Rng rng(Rng::fresh_seed());
  SCOPED_TRACE("seed " + std::to_string(rng.seed()));
  const ProblemSpec s = decode_spec(dims.front(), 1, {4000, 1, 0, 2500}, 32, 8);
  AttentionTensors t = make_tensors(s, rng);
  // Sinks near the rows' own LSE (ln 4000 ~ 8), where a sink counted per split would be far off.
  const std::vector<float> sinks = random_sinks(s.heads_q, rng, 6.0, 10.0);
  const Expected expected = expected_with_sinks(s, t, all_rows(s), sinks);
  ASSERT_EQ(run_decode(s, t, SplitRun{1}, sinks), DecodeOutcome::ran);
  EXPECT_TRUE(matches(s, t, expected, SplitRun{1}.describe()));
  const RowResults one = gather_output(s, t, all_rows(s));
  for (const SplitRun run : {SplitRun{16}, SplitRun{16, Merge::cluster}, SplitRun{8, Merge::cluster}}) {
    SCOPED_TRACE(run.describe());
    t.o.poison();
    t.lse.poison();
    if (run_decode(s, t, run, sinks) != DecodeOutcome::ran) continue;
    EXPECT_TRUE(matches(s, t, expected, run.describe()));
    const RowResults many = gather_output(s, t, all_rows(s));
    double max_diff = 0.0;
    for (std::size_t i = 0; i < one.o.size(); ++i) max_diff = std::max(max_diff, std::fabs(one.o[i] - many.o[i]));
    EXPECT_LE(max_diff, 2 * default_atol(s.dtype)) << "split and unsplit outputs differ by " << max_diff;
  }
}

TEST_F(SinksDecode, NaNQueryOrKeyGivesNaNRow) {
  const std::vector<int> dims = built_head_dims(true);
  if (dims.empty()) GTEST_SKIP() << "no bf16 decode head dim of 64, 128 or 256 is built";
  Rng rng(Rng::fresh_seed());
  SCOPED_TRACE("seed " + std::to_string(rng.seed()));
  // Sequence 1's keys 0..199 are outside every row's window (window 128 over 330 keys): the
  // splits there are empty, so a NaN row's parts mix NaN and empty ones.
  ProblemSpec s = decode_spec(dims.front(), 2, {500, 330}, 16, 2);
  s.mask = Mask::window(128, 0);
  for (bool with_sinks : {false, true}) {
    SCOPED_TRACE(with_sinks ? "with sinks" : "without sinks");
    const std::vector<float> sinks = with_sinks ? random_sinks(s.heads_q, rng, -2.0, 4.0) : std::vector<float>{};
    AttentionTensors t = make_tensors(s, rng);
    t.q.set(t.q.offset({1, 1, 11, 0}), kNaN);  // query token 1 of sequence 1, head 11
    AttentionTensors t2 = make_tensors(s, rng);
    t2.k.set(t2.k.offset({0, 450, 0, 5}), kNaN);  // key 450 of sequence 0, KV head 0
    for (const SplitRun run : kSplitRuns) {
      SCOPED_TRACE(run.describe());
      t.o.poison();
      t.lse.poison();
      if (run_decode(s, t, run, sinks) != DecodeOutcome::ran) continue;
      EXPECT_TRUE(nan_rows_and_the_rest(s, t, [](const RowId& r) { return r.b == 1 && r.i == 1 && r.h == 11; }, sinks));
      t2.o.poison();
      t2.lse.poison();
      ASSERT_EQ(run_decode(s, t2, run, sinks), DecodeOutcome::ran);
      // Query token i of sequence 0 sits at key 498 + i and sees keys [370 + i, 498 + i].
      EXPECT_TRUE(nan_rows_and_the_rest(s, t2, [&](const RowId& r) { return r.b == 0 && r.h < 8; }, sinks));
    }
  }
  // A NaN sink is read by every row of its head: split or not, and in a sequence without keys
  // (whose parts are all empty).
  ProblemSpec e = decode_spec(dims.front(), 1, {1000, 0, 17}, 8, 2);
  std::vector<float> sinks = random_sinks(e.heads_q, rng, -2.0, 4.0);
  sinks[3] = static_cast<float>(kNaN);
  AttentionTensors t = make_tensors(e, rng);
  for (const SplitRun run : kSplitRuns) {
    SCOPED_TRACE(run.describe());
    t.o.poison();
    t.lse.poison();
    if (run_decode(e, t, run, sinks) != DecodeOutcome::ran) continue;
    EXPECT_TRUE(nan_rows_and_the_rest(e, t, [](const RowId& r) { return r.h == 3; }, sinks));
  }
}

}  // namespace
}  // namespace flashbuf::reference
