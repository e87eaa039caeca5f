// GPU tests of the split-KV decode (plan_decode / decode) and of merge_states on CUDA tensors:
// every feature against src/reference's float64 reference (computed on the device) under its
// twice-the-naive-error rule, on random inputs; outputs poisoned
// (NaN bit patterns) before each run, with guard regions and inter-head padding checked
// after; K/V past each sequence's length and unused pool pages filled with NaN (a read of
// them would show); paged against contiguous (bit-identical with the same plan); split
// against unsplit; CUDA-graph capture once and replay with changed lengths; decode against
// the prefill path; bad page indices stay memory-safe. Small sizes: the suite runs in seconds.
//
// Cases whose (dtype, head_dim) is not in FLASHBUF_DECODE_INSTANTIATIONS are skipped with a
// message. Small cases for compute-sanitizer (memcheck, racecheck, synccheck, initcheck):
//   compute-sanitizer --tool racecheck ./flashbuf_gpu_tests --gtest_filter='DecodeSanitizer.*:MergeStatesGpu.*'
//
// A watchdog (installed here for the whole test binary) aborts with the name of the running
// test when one test runs longer than FLASHBUF_TEST_WATCHDOG_S seconds (default 80, below
// ctest's --timeout 90; 0 disables; off by default under compute-sanitizer, found by its
// environment or, when a test first overruns, by its libraries in the process), so a hang names
// itself instead of leaving a silent binary.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/backends.hpp"
#include "gpu_test_util.cuh"
#include "flashbuf/core/numeric.hpp"
#include "flashbuf/flashbuf.hpp"
#include "flashbuf/kernels/decode_config.cuh"
#include "flashbuf/tuning.hpp"
#include "reference/check.hpp"
#include "reference/gpu_reference.hpp"
#include "reference/spec.hpp"

namespace flashbuf::decode_test {
namespace {

// ---- the watchdog ------------------------------------------------------------------------

// The limit a test gets, and whether FLASHBUF_TEST_WATCHDOG_S set it (then it holds under
// compute-sanitizer too).
struct WatchdogLimit {
  int seconds;
  bool from_env;
};
WatchdogLimit watchdog_limit() {
  if (const char* env = std::getenv("FLASHBUF_TEST_WATCHDOG_S"); env != nullptr && *env != '\0') {
    return {std::atoi(env), true};
  }
  // Under compute-sanitizer (or another injected CUDA tool) everything is many times slower.
  const char* injection = std::getenv("CUDA_INJECTION64_PATH");
  const char* preload = std::getenv("LD_PRELOAD");
  if ((injection != nullptr && *injection != '\0') ||
      (preload != nullptr && std::strstr(preload, "sanitizer") != nullptr)) {
    return {0, false};
  }
  return {80, false};
}

// Whether compute-sanitizer's libraries are mapped into this process. Its launcher may take its
// preload out of the environment before the tests start, so the environment alone can miss it;
// by the time a test overruns, CUDA is initialised and the tool's collection library is loaded.
bool sanitizer_attached() {
  std::FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return false;
  char line[4096];
  bool found = false;
  while (!found && std::fgets(line, sizeof line, maps) != nullptr) {
    found = std::strstr(line, "libsanitizer-collection") != nullptr ||
            std::strstr(line, "libTreeLauncherTargetInjection") != nullptr;
  }
  std::fclose(maps);
  return found;
}

class Watchdog final : public ::testing::EmptyTestEventListener {
 public:
  explicit Watchdog(WatchdogLimit limit)
      : seconds_(limit.seconds), limit_from_env_(limit.from_env), thread_([this] { watch(); }) {}
  ~Watchdog() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void OnTestStart(const ::testing::TestInfo& info) override {
    std::lock_guard<std::mutex> lock(mutex_);
    name_ = std::string(info.test_suite_name()) + "." + info.name();
    deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(seconds_);
    armed_ = !disabled_;
    cv_.notify_all();
  }
  void OnTestEnd(const ::testing::TestInfo&) override {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = false;
    cv_.notify_all();
  }

 private:
  void watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      if (!armed_) {
        cv_.wait(lock);
        continue;
      }
      cv_.wait_until(lock, deadline_);
      if (!stop_ && armed_ && std::chrono::steady_clock::now() >= deadline_) {
        if (!limit_from_env_ && sanitizer_attached()) {  // many times slower: no default limit
          std::fprintf(stderr, "\n[ WATCHDOG ] off: compute-sanitizer is attached\n");
          armed_ = false;
          disabled_ = true;
          continue;
        }
        std::fprintf(stderr,
                     "\n[ WATCHDOG ] %s is still running after %d s: aborting the test binary "
                     "(a hang; FLASHBUF_TEST_WATCHDOG_S=<seconds> changes the limit, 0 disables it)\n",
                     name_.c_str(), seconds_);
        std::fflush(stderr);
        std::fflush(stdout);
        std::_Exit(124);
      }
    }
  }

  const int seconds_;
  const bool limit_from_env_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::string name_;
  std::chrono::steady_clock::time_point deadline_{};
  bool armed_ = false;
  bool disabled_ = false;  // compute-sanitizer found attached
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

// Installed before main (gtest_main's InitGoogleTest keeps appended listeners); gtest owns it.
[[maybe_unused]] const bool kWatchdogInstalled = [] {
  const WatchdogLimit limit = watchdog_limit();
  if (limit.seconds > 0) ::testing::UnitTest::GetInstance()->listeners().Append(new Watchdog(limit));
  return limit.seconds > 0;
}();

// ---- helpers -----------------------------------------------------------------------------

// The decode kernels this build compiled (FLASHBUF_DECODE_INSTANTIATIONS).
bool decode_built(DType dtype, int d) { return detail::decode_instantiated(dtype, d); }

#define DECODE_REQUIRE_KERNEL(dtype, d)                                                          \
  do {                                                                                           \
    if (!decode_built(dtype, d)) {                                                               \
      GTEST_SKIP() << "decode " << dtype_name(dtype) << " head_dim " << (d)                      \
                   << " is not in FLASHBUF_DECODE_INSTANTIATIONS of this build";                 \
    }                                                                                            \
  } while (0)

constexpr std::uint16_t kPoison16 = 0xFFFF;      // NaN as bf16 and as fp16
constexpr std::uint32_t kPoison32 = 0x7FC0DEADu;  // a quiet NaN with a payload
constexpr float kInf = std::numeric_limits<float>::infinity();

class DevMem {
 public:
  explicit DevMem(std::size_t bytes) : bytes_(bytes) {
    if (bytes_ > 0 && cudaMalloc(&ptr_, bytes_) != cudaSuccess) ptr_ = nullptr;
  }
  ~DevMem() { cudaFree(ptr_); }
  DevMem(const DevMem&) = delete;
  DevMem& operator=(const DevMem&) = delete;
  void* get() const { return ptr_; }
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }
  std::size_t bytes() const { return bytes_; }
  template <class T>
  void upload(const std::vector<T>& host) const {
    cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  template <class T>
  std::vector<T> download() const {
    std::vector<T> host(bytes_ / sizeof(T));
    cudaMemcpy(host.data(), ptr_, host.size() * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

std::uint16_t to16(float x, DType dt) { return dt == DType::bf16 ? float_to_bf16(x) : float_to_fp16(x); }
float from16(std::uint16_t x, DType dt) { return dt == DType::bf16 ? bf16_to_float(x) : fp16_to_float(x); }

TensorView strided_view(void* data, DType dtype, std::vector<std::int64_t> shape,
                        std::vector<std::int64_t> stride) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.rank = static_cast<int>(shape.size());
  for (int i = 0; i < v.rank; ++i) {
    v.shape[i] = shape[i];
    v.stride[i] = stride[i];
  }
  v.device = DeviceKind::cuda;
  v.device_index = 0;
  return v;
}

// ---- problems ------------------------------------------------------------------------

struct Case {
  std::string name;
  DType dtype = DType::bf16;
  int d = 128;
  int hq = 8, hkv = 2;
  int t = 1;  // query tokens per sequence
  std::vector<int> lens;
  int capacity = 0;  // Smax of the contiguous cache (0: max(lens) + 5); the plan's max_seqlen_k
  int page = 0;      // paged layout's page size (0: contiguous only)
  Mask mask{};
  float softcap = 0.0f;
  float scale = 0.0f;
  bool lse = true;
  int o_head_pad = 0;  // elements of padding between o's heads (multiple of 8)
  int splits = 0;      // 0: the plan's heuristic

  int batch() const { return static_cast<int>(lens.size()); }
  int smax() const {
    if (capacity > 0) return capacity;
    return *std::max_element(lens.begin(), lens.end()) + 5;
  }
  std::string describe() const {
    std::ostringstream s;
    s << name << " [" << dtype_name(dtype) << " D=" << d << " Hq/Hkv=" << hq << "/" << hkv << " T=" << t
      << " page=" << page << " mask=" << static_cast<int>(mask.kind) << "(" << mask.window_left << ","
      << mask.window_right << ") softcap=" << softcap << " splits=" << splits << " lens={";
    for (std::size_t i = 0; i < lens.size(); ++i) s << (i ? "," : "") << lens[i];
    s << "}]";
    return s.str();
  }
};

// Inputs as 16-bit storage and as the rounded floats the reference uses. K/V rows at or
// past a sequence's length hold NaN (`poison_tail`), so any read of them shows in O.
struct Inputs {
  std::vector<std::uint16_t> q16, k16, v16;  // q (B,T,Hq,D), k/v (B,Smax,Hkv,D)
  std::vector<float> q, k, v;
};

Inputs make_inputs(const Case& c, std::uint32_t seed, bool poison_tail = true) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int b = c.batch(), smax = c.smax();
  Inputs in;
  auto fill = [&](std::vector<std::uint16_t>& bits, std::vector<float>& vals, std::size_t n) {
    bits.resize(n);
    vals.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      bits[i] = to16(normal(rng), c.dtype);
      vals[i] = from16(bits[i], c.dtype);
    }
  };
  fill(in.q16, in.q, std::size_t(b) * c.t * c.hq * c.d);
  fill(in.k16, in.k, std::size_t(b) * smax * c.hkv * c.d);
  fill(in.v16, in.v, std::size_t(b) * smax * c.hkv * c.d);
  if (poison_tail) {
    for (int bb = 0; bb < b; ++bb) {
      for (int j = c.lens[bb]; j < smax; ++j) {
        const std::size_t off = (std::size_t(bb) * smax + j) * c.hkv * c.d;
        std::fill_n(in.k16.begin() + off, c.hkv * c.d, kPoison16);
        std::fill_n(in.v16.begin() + off, c.hkv * c.d, kPoison16);
      }
    }
  }
  return in;
}

// The references of src/reference (float64, and the naive same-precision lowp that sets the
// error budget: check.hpp's twice-the-naive-error rule), computed on the device over the case's
// inputs as a batch-form problem with seqlens_k = lens (the rows past a length, NaN here, are
// never read). o (B,T,Hq,D); lse (B,Hq,T) natural log; -inf / 0 for rows with no key.
struct Reference {
  std::vector<double> o, lse, low_o, low_lse;
  // The rule's bound on |out - float64| for o and lse.
  double o_bound(DType dt) const { return 2 * reference::max_abs_error(low_o, o) + reference::default_atol(dt); }
  double lse_bound() const { return 2 * reference::max_abs_error(low_lse, lse) + reference::kLseAtol; }
};

Reference reference_outputs(const Case& c, const Inputs& in, const std::vector<int>& lens) {
  const int b_n = c.batch(), smax = c.smax();
  reference::ProblemSpec spec;
  spec.batch = b_n;
  spec.seqlen_q = c.t;
  spec.seqlen_k = smax;
  spec.k_lens = lens;
  spec.use_seqlens_k = true;
  spec.heads_q = c.hq;
  spec.heads_kv = c.hkv;
  spec.head_dim = spec.head_dim_v = c.d;
  spec.dtype = c.dtype;
  spec.mask = c.mask;
  spec.softcap = c.softcap;
  spec.softmax_scale = c.scale;
  reference::Rng rng(1);
  reference::AttentionTensors t = reference::make_tensors(spec, rng, /*fill_inputs=*/false);
  auto copy = [&](reference::HostTensor& dst, const std::vector<std::uint16_t>& bits) {
    for (std::int64_t i = 0; i < dst.numel(); ++i) dst.set(dst.logical_to_storage(i), from16(bits[i], c.dtype));
  };
  copy(t.q, in.q16);
  copy(t.k, in.k16);
  copy(t.v, in.v16);
  const reference::DeviceReferences r = reference::gpu_reference_attention(spec, t, reference::all_rows(spec));
  Reference out;
  out.o = r.float64.o;
  out.low_o = r.lowp.o;
  // RowResults keep lse at (b * T + i) * Hq + h; the test's layout is (B, Hq, T).
  out.lse.resize(r.float64.lse.size());
  out.low_lse.resize(out.lse.size());
  for (int b = 0; b < b_n; ++b)
    for (int i = 0; i < c.t; ++i)
      for (int h = 0; h < c.hq; ++h) {
        const std::size_t from = (std::size_t(b) * c.t + i) * c.hq + h, to = (std::size_t(b) * c.hq + h) * c.t + i;
        out.lse[to] = r.float64.lse[from];
        out.low_lse[to] = r.lowp.lse[from];
      }
  return out;
}

// ---- one decode run on the device --------------------------------------------------------

namespace dk = flashbuf::kernels::decode;
using Merge = dk::SplitMerge;

// A plan edited to `splits` splits merged by `merge` (a split plan without workspace merges
// in thread-block clusters).
DecodePlan with_splits(DecodePlan plan, int splits, Merge merge) {
  const DecodeProblem& pr = plan.problem;
  const int bn = dk::block_n_for(pr.head_dim, pr.q_per_seq * (pr.heads_q / pr.heads_kv));
  plan.num_splits = splits;
  plan.keys_per_split = dk::split_keys(pr.max_seqlen_k, splits, bn);
  plan.workspace_bytes = merge == Merge::cluster ? 0
                         : dk::workspace_layout(splits, pr.batch, pr.q_per_seq, pr.heads_q, pr.head_dim_v).bytes;
  return plan;
}

// The most splits the cluster merge takes for this problem's kernel on this device (16, 8 or
// 0: before sm_90, or an sm_80 build), asked through plan_decode: a forced split count the
// cluster can take gets a plan without workspace.
int cluster_limit(const DecodeProblem& pr) {
  TuningOverrides forced = tuning_overrides();
  forced.decode_merge = DecodeMergeOverride::cluster;
  for (int n : {dk::kMaxClusterSplits, 8}) {
    forced.decode_splits = n;
    ScopedTuning scope(forced);
    const DecodePlan plan = plan_decode(pr);
    if (plan.num_splits == n && plan.workspace_bytes == 0) return n;
  }
  return 0;
}

// One forced split count with its merge; the cluster ones are skipped where clusters are not.
struct SplitRun {
  int splits;  // 0: the plan's heuristic
  Merge merge = Merge::workspace;
  std::string describe() const {
    return "splits " + std::to_string(splits) + (merge == Merge::cluster && splits > 1 ? " (cluster)" : "");
  }
};

// Device copies of one case's tensors, in the contiguous or the paged layout, with guarded,
// poisoned outputs.
struct DeviceCase {
  static constexpr std::int64_t kGuard = 64;  // elements on each side of o and lse
  const Case& c;
  bool paged;
  int max_pages = 0, num_pages = 0;
  std::int64_t o_head_stride = 0, o_row_stride = 0, o_batch_stride = 0, o_span = 0;
  DevMem q, k, v, lens, table, o, lse;
  std::unique_ptr<DevMem> ws = std::make_unique<DevMem>(0);
  DecodePlan plan;

  static std::size_t o_elems(const Case& c) {
    return std::size_t(c.batch()) * c.t * c.hq * (c.d + c.o_head_pad) + 2 * kGuard;
  }
  static int pages_per_seq(const Case& c) { return c.page > 0 ? (c.smax() + c.page - 1) / c.page : 0; }
  static int pool_pages(const Case& c) { return c.batch() * pages_per_seq(c) + 3; }  // +3 unused, NaN

  DeviceCase(const Case& c_, const Inputs& in, bool paged_, std::uint32_t seed)
      : c(c_),
        paged(paged_),
        q(in.q16.size() * 2),
        k((paged_ ? std::size_t(pool_pages(c_)) * c_.page * c_.hkv * c_.d : in.k16.size()) * 2),
        v((paged_ ? std::size_t(pool_pages(c_)) * c_.page * c_.hkv * c_.d : in.v16.size()) * 2),
        lens(c_.lens.size() * 4),
        table(paged_ ? std::size_t(c_.batch()) * pages_per_seq(c_) * 4 : 0),
        o(o_elems(c_) * 2),
        lse((std::size_t(c_.batch()) * c_.hq * c_.t + 2 * kGuard) * 4) {
    const int b_n = c.batch(), smax = c.smax(), row = c.hkv * c.d;
    q.upload(in.q16);
    lens.upload(c.lens);
    if (!paged) {
      k.upload(in.k16);
      v.upload(in.v16);
    } else {
      max_pages = pages_per_seq(c);
      num_pages = pool_pages(c);
      // Pages shuffled over the pool; pool pages no sequence owns stay NaN.
      std::vector<int> perm(num_pages);
      std::iota(perm.begin(), perm.end(), 0);
      std::mt19937 rng(seed ^ 0x9E3779B9u);
      std::shuffle(perm.begin(), perm.end(), rng);
      std::vector<std::int32_t> tab(std::size_t(b_n) * max_pages);
      std::vector<std::uint16_t> kp(std::size_t(num_pages) * c.page * row, kPoison16), vp(kp.size(), kPoison16);
      for (int b = 0; b < b_n; ++b) {
        for (int s = 0; s < max_pages; ++s) {
          const int page_id = perm[b * max_pages + s];
          tab[std::size_t(b) * max_pages + s] = page_id;
          for (int r = 0; r < c.page; ++r) {
            const int j = s * c.page + r;
            if (j >= smax) break;
            std::copy_n(in.k16.begin() + (std::size_t(b) * smax + j) * row, row,
                        kp.begin() + (std::size_t(page_id) * c.page + r) * row);
            std::copy_n(in.v16.begin() + (std::size_t(b) * smax + j) * row, row,
                        vp.begin() + (std::size_t(page_id) * c.page + r) * row);
          }
        }
      }
      k.upload(kp);
      v.upload(vp);
      table.upload(tab);
    }
    o_head_stride = c.d + c.o_head_pad;
    o_row_stride = o_head_stride * c.hq;
    o_batch_stride = o_row_stride * c.t;
  }

  DecodeProblem problem() const {
    DecodeProblem pr;
    pr.batch = c.batch();
    pr.q_per_seq = c.t;
    pr.heads_q = c.hq;
    pr.heads_kv = c.hkv;
    pr.head_dim = c.d;
    pr.head_dim_v = c.d;
    pr.max_seqlen_k = c.smax();
    pr.page_size = paged ? c.page : 0;
    pr.dtype = c.dtype;
    pr.device = DeviceKind::cuda;
    return pr;
  }

  // False (and no plan) for a cluster merge this device or build cannot run.
  bool make_plan(int splits, Merge merge = Merge::workspace) {
    plan = plan_decode(problem());
    if (splits > 1 && merge == Merge::cluster && cluster_limit(problem()) < splits) return false;
    if (splits > 0) plan = with_splits(plan, splits, merge);
    ws = std::make_unique<DevMem>(plan.workspace_bytes);
    return true;
  }
  bool make_plan(const SplitRun& run) { return make_plan(run.splits, run.merge); }

  void poison() {
    cudaMemset(o.get(), 0xFF, o.bytes());  // 0xFFFF: NaN in bf16 and fp16
    std::vector<std::uint32_t> l(lse.bytes() / 4, kPoison32);
    lse.upload(l);
    if (ws->bytes()) cudaMemset(ws->get(), 0xFF, ws->bytes());  // NaN everywhere in the workspace
  }

  DecodeArgs args(cudaStream_t stream = nullptr) const {
    const int b_n = c.batch(), smax = c.smax();
    DecodeArgs a;
    a.q = strided_view(q.get(), c.dtype, {b_n, c.t, c.hq, c.d},
                       {std::int64_t(c.t) * c.hq * c.d, std::int64_t(c.hq) * c.d, c.d, 1});
    if (!paged) {
      a.k = strided_view(k.get(), c.dtype, {b_n, smax, c.hkv, c.d},
                         {std::int64_t(smax) * c.hkv * c.d, std::int64_t(c.hkv) * c.d, c.d, 1});
    } else {
      a.k = strided_view(k.get(), c.dtype, {num_pages, c.page, c.hkv, c.d},
                         {std::int64_t(c.page) * c.hkv * c.d, std::int64_t(c.hkv) * c.d, c.d, 1});
      a.page_table = strided_view(table.get(), DType::int32, {b_n, max_pages}, {max_pages, 1});
    }
    a.v = a.k;
    a.v.data = v.get();
    a.seqlens_k = strided_view(lens.get(), DType::int32, {b_n}, {1});
    a.o = strided_view(static_cast<std::uint16_t*>(o.get()) + kGuard, c.dtype, {b_n, c.t, c.hq, c.d},
                       {o_batch_stride, o_row_stride, o_head_stride, 1});
    if (c.lse) {
      a.lse = strided_view(static_cast<float*>(lse.get()) + kGuard, DType::fp32, {b_n, c.hq, c.t},
                           {std::int64_t(c.hq) * c.t, c.t, 1});
    }
    a.softmax_scale = c.scale;
    a.mask = c.mask;
    a.softcap = c.softcap;
    a.workspace = ws->get();
    a.stream = stream;
    return a;
  }

  // Runs decode (synchronously for the test) after poisoning the outputs.
  ::testing::AssertionResult run() {
    poison();
    try {
      decode(plan, args());
    } catch (const std::exception& e) {
      return ::testing::AssertionFailure() << "decode threw: " << e.what();
    }
    const cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) return ::testing::AssertionFailure() << "decode kernel failed: " << cudaGetErrorString(err);
    return ::testing::AssertionSuccess();
  }
};

// Compares the device outputs with the reference under the twice-the-naive-error rule; checks
// guards and padding kept their poison.
::testing::AssertionResult check_outputs(const DeviceCase& dc, const std::vector<int>& lens, const Reference& ref) {
  const Case& c = dc.c;
  const auto o = dc.o.download<std::uint16_t>();
  const auto lse = dc.lse.download<float>();
  std::vector<char> is_output(o.size(), 0);
  int overwritten = 0;
  std::ostringstream msg;
  std::vector<double> got_o(ref.o.size());
  for (int b = 0; b < c.batch(); ++b) {
    for (int i = 0; i < c.t; ++i) {
      for (int h = 0; h < c.hq; ++h) {
        for (int d = 0; d < c.d; ++d) {
          const std::size_t pos = DeviceCase::kGuard + b * dc.o_batch_stride + i * dc.o_row_stride + h * dc.o_head_stride + d;
          is_output[pos] = 1;
          got_o[((std::size_t(b) * c.t + i) * c.hq + h) * c.d + d] = from16(o[pos], c.dtype);
        }
      }
    }
  }
  const reference::Comparison co =
      reference::compare(got_o, ref.o, ref.low_o, reference::default_atol(c.dtype), "o (b, i, h, d row-major)");
  if (!co.ok) msg << "\n  " << co.detail;
  for (std::size_t pos = 0; pos < o.size(); ++pos) {
    if (!is_output[pos] && o[pos] != kPoison16) {
      if (overwritten++ < 4) msg << "\n  o storage element " << pos << " outside the output view was written";
    }
  }
  int lse_overwritten = 0;
  bool lse_ok = true;
  if (c.lse) {
    std::vector<double> got_lse(ref.lse.size());
    for (std::size_t idx = 0; idx < got_lse.size(); ++idx) got_lse[idx] = lse[DeviceCase::kGuard + idx];
    const reference::Comparison cl =
        reference::compare(got_lse, ref.lse, ref.low_lse, reference::kLseAtol, "lse (b, h, i row-major)");
    lse_ok = cl.ok;
    if (!cl.ok) msg << "\n  " << cl.detail;
    const std::size_t n = std::size_t(c.batch()) * c.hq * c.t;
    for (std::size_t j = 0; j < lse.size(); ++j) {
      const bool inside = j >= std::size_t(DeviceCase::kGuard) && j < DeviceCase::kGuard + n;
      std::uint32_t bits;
      std::memcpy(&bits, &lse[j], 4);
      if (!inside && bits != kPoison32 && lse_overwritten++ < 4) msg << "\n  lse guard element " << j << " was written";
    }
  } else {
    for (float x : lse) {
      std::uint32_t bits;
      std::memcpy(&bits, &x, 4);
      if (bits != kPoison32) ++lse_overwritten;
    }
    if (lse_overwritten) msg << "\n  lse was written although no lse was passed";
  }
  if (!co.ok || !lse_ok || overwritten || lse_overwritten) {
    std::ostringstream lens_text;
    for (std::size_t b = 0; b < lens.size(); ++b) lens_text << (b ? "," : "") << lens[b];
    return ::testing::AssertionFailure() << c.describe() << (dc.paged ? " paged" : " contiguous") << " splits "
                                         << dc.plan.num_splits << (dc.plan.num_splits > 1 && dc.plan.workspace_bytes == 0 ? " (cluster)" : "")
                                         << " lens {" << lens_text.str() << "}: o max |err| " << co.max_abs_err << " (bound "
                                         << co.bound << "), " << overwritten + lse_overwritten
                                         << " guard/padding elements overwritten" << msg.str();
  }
  return ::testing::AssertionSuccess() << "max |err| " << co.max_abs_err << " (bound " << co.bound << ")";
}

std::vector<Case> feature_cases() {
  std::vector<Case> cases;
  auto add = [&](Case c) { cases.push_back(std::move(c)); };
  {
    Case c{"gqa4_bf16_d128"};
    c.hq = 32, c.hkv = 8, c.lens = {0, 1, 37, 300, 1000}, c.page = 16;
    add(c);
  }
  {
    // A scale of its own (the validator refuses scales <= 0: docs/errors.md).
    Case c{"gqa4_bf16_d128_scale"};
    c.hq = 8, c.hkv = 2, c.lens = {1, 64, 200, 1000}, c.page = 16, c.scale = 0.37f, c.lse = true;
    add(c);
  }
  {
    Case c{"group8_fp16_d64_causal_softcap"};
    c.dtype = DType::fp16, c.d = 64, c.hq = 8, c.hkv = 1, c.t = 4, c.lens = {3, 1, 130, 515};
    c.page = 7, c.mask = Mask::causal(), c.softcap = 30.0f, c.o_head_pad = 8;
    add(c);
  }
  {
    Case c{"group4_bf16_d256_window"};
    c.d = 256, c.hq = 8, c.hkv = 2, c.t = 3, c.lens = {700, 2, 64, 333};
    c.page = 256, c.mask = Mask::window(50, 0), c.scale = 0.07f;
    add(c);
  }
  {
    Case c{"group16_bf16_d128_t9_two_row_chunks"};
    c.hq = 32, c.hkv = 2, c.t = 9, c.lens = {200, 9, 5};
    c.page = 64, c.mask = Mask::causal();
    add(c);
  }
  {
    Case c{"group5_fp16_d128_t5_window_both_sides"};
    c.dtype = DType::fp16, c.hq = 10, c.hkv = 2, c.t = 5, c.lens = {90, 4, 257};
    c.page = 1, c.mask = Mask::window(20, 2), c.lse = true;
    add(c);
  }
  {
    Case c{"mha_bf16_d64_t16_causal"};
    c.d = 64, c.hq = 4, c.hkv = 4, c.t = 16, c.lens = {16, 15, 100, 0};
    c.page = 64, c.mask = Mask::causal(), c.lse = false;
    add(c);
  }
  {
    Case c{"group4_fp16_d256_t12_mtiles4"};
    c.dtype = DType::fp16, c.d = 256, c.hq = 4, c.hkv = 1, c.t = 12, c.lens = {50, 129};
    c.page = 32, c.mask = Mask::causal(), c.o_head_pad = 16;
    add(c);
  }
  {
    Case c{"group2_bf16_d256_t16_mtiles2"};
    c.d = 256, c.hq = 4, c.hkv = 2, c.t = 16, c.lens = {40, 17};
    c.page = 16, c.softcap = 5.0f;
    add(c);
  }
  {
    // One packed row a block (one token, a head of its own): 8 pieces at D 64, so the cluster
    // merges of 11 splits have blocks that merge no piece of the push merge (they only push).
    Case c{"mha_bf16_d64_one_row"};
    c.d = 64, c.hq = 4, c.hkv = 4, c.lens = {1, 70, 333, 1000};
    c.page = 16;
    add(c);
  }
  {
    Case c{"group8_bf16_d128_t8_mtiles4_long"};
    c.hq = 16, c.hkv = 2, c.t = 8, c.lens = {2100, 1};
    c.page = 48, c.mask = Mask::window(300, 0);
    add(c);
  }
  return cases;
}

// ---- the tests ---------------------------------------------------------------------------

// Every feature case, contiguous and paged, with the plan's splits and with forced splits
// (1 = the direct-output path, 3 and 7 = the workspace + combine path and the cluster merge,
// 11 = a cluster merge over lane groups of 16 parts, where 16-block clusters run),
// against float64.
TEST(DecodeGpu, FeaturesAgainstReference) {
  FLASHBUF_REQUIRE_GPU();
  std::uint32_t seed = 1234;
  int ran = 0;
  for (const Case& base : feature_cases()) {
    const Inputs in = make_inputs(base, seed++);
    if (!decode_built(base.dtype, base.d)) {
      std::printf("[ skipped  ] %s: not in FLASHBUF_DECODE_INSTANTIATIONS\n", base.describe().c_str());
      continue;
    }
    ++ran;
    const Reference ref = reference_outputs(base, in, base.lens);
    for (bool paged : {false, true}) {
      for (const SplitRun run : {SplitRun{0}, SplitRun{1}, SplitRun{3}, SplitRun{7}, SplitRun{3, Merge::cluster},
                                 SplitRun{7, Merge::cluster}, SplitRun{11, Merge::cluster}}) {
        Case c = base;
        c.splits = run.splits;
        SCOPED_TRACE(c.describe() + (paged ? " paged " : " contiguous ") + run.describe());
        DeviceCase dc(c, in, paged, seed);
        bool planned = false;
        ASSERT_NO_THROW(planned = dc.make_plan(run));
        if (!planned) continue;
        ASSERT_TRUE(dc.run());
        EXPECT_TRUE(check_outputs(dc, c.lens, ref));
      }
    }
  }
  if (ran == 0) GTEST_SKIP() << "no feature case's kernel is in FLASHBUF_DECODE_INSTANTIATIONS";
}

// Small cases for compute-sanitizer (memcheck, racecheck, synccheck, initcheck): every
// stage of the kernel (Q load, the cp.async ring, the epilogue's aliased buffers, the
// direct and the workspace outputs, the programmatic-launch combine, the cluster merge's
// distributed shared memory) at tiny sizes.
//   compute-sanitizer --tool racecheck ./flashbuf_gpu_tests --gtest_filter='DecodeSanitizer.*:MergeStatesGpu.*'
void sanitizer_case(const Case& c, std::uint32_t seed) {
  const Inputs in = make_inputs(c, seed);
  const Reference ref = reference_outputs(c, in, c.lens);
  for (bool paged : {false, true}) {
    for (const SplitRun run : {SplitRun{1}, SplitRun{3}, SplitRun{3, Merge::cluster}}) {
      SCOPED_TRACE(c.describe() + (paged ? " paged " : " contiguous ") + run.describe());
      DeviceCase dc(c, in, paged, seed + 1);
      bool planned = false;
      ASSERT_NO_THROW(planned = dc.make_plan(run));
      if (!planned) continue;
      ASSERT_TRUE(dc.run());
      EXPECT_TRUE(check_outputs(dc, c.lens, ref));
    }
  }
}

// bf16, D = 128, 8 rows (one 16-row tile, 4 warps splitting each key tile), causal.
TEST(DecodeSanitizer, Bf16D128OneTile) {
  FLASHBUF_REQUIRE_GPU();
  DECODE_REQUIRE_KERNEL(DType::bf16, 128);
  Case c{"sanitizer_bf16_d128"};
  c.hq = 8, c.hkv = 2, c.t = 2, c.lens = {0, 1, 70, 200};
  c.page = 16, c.mask = Mask::causal();
  sanitizer_case(c, 77);
}

// fp16, D = 64, 32 rows (two row tiles: 2 x 2 warps), causal, softcap, odd page size.
TEST(DecodeSanitizer, Fp16D64TwoTiles) {
  FLASHBUF_REQUIRE_GPU();
  DECODE_REQUIRE_KERNEL(DType::fp16, 64);
  Case c{"sanitizer_fp16_d64"};
  c.dtype = DType::fp16, c.d = 64, c.hq = 8, c.hkv = 1, c.t = 4, c.lens = {3, 130};
  c.page = 7, c.mask = Mask::causal(), c.softcap = 30.0f;
  sanitizer_case(c, 78);
}

// bf16, D = 256 (Q re-read from shared memory), 12 rows, sliding window.
TEST(DecodeSanitizer, Bf16D256Window) {
  FLASHBUF_REQUIRE_GPU();
  DECODE_REQUIRE_KERNEL(DType::bf16, 256);
  Case c{"sanitizer_bf16_d256"};
  c.d = 256, c.hq = 8, c.hkv = 2, c.t = 3, c.lens = {2, 150};
  c.page = 32, c.mask = Mask::window(50, 0);
  sanitizer_case(c, 79);
}

// Every compiled kernel shape (dtype x D x MTiles 1/2/4/8) plans and runs correctly. The plan
// prepares each kernel separately (shared-memory opt-in, then occupancy): a cache shared by
// kernels once let the first kernel's opt-in stand for all, and the others reported 0 blocks.
TEST(DecodeGpu, EveryKernelShapePlansAndRuns) {
  FLASHBUF_REQUIRE_GPU();
  int ran = 0;
  std::uint32_t seed = 500;
  for (DType dtype : {DType::bf16, DType::fp16}) {
    for (int d : {64, 128, 256}) {
      if (!decode_built(dtype, d)) continue;
      // rows = t * group: 4 (MTiles 1), 24 (2), 48 (4), 128 (8)
      const int shapes[][3] = {{1, 4, 1}, {3, 8, 1}, {6, 8, 1}, {16, 8, 1}};  // t, hq, hkv
      for (const auto& sh : shapes) {
        Case c{"every_shape"};
        c.dtype = dtype, c.d = d, c.t = sh[0], c.hq = sh[1], c.hkv = sh[2], c.lens = {45, 3};
        c.page = 8, c.mask = Mask::causal();
        const Inputs in = make_inputs(c, seed++);
        const Reference ref = reference_outputs(c, in, c.lens);
        for (const SplitRun run : {SplitRun{1}, SplitRun{2}, SplitRun{2, Merge::cluster}}) {
          SCOPED_TRACE(c.describe() + " " + run.describe());
          DeviceCase dc(c, in, false, seed);
          bool planned = false;
          ASSERT_NO_THROW(planned = dc.make_plan(run));
          if (!planned) continue;
          ASSERT_TRUE(dc.run());
          EXPECT_TRUE(check_outputs(dc, c.lens, ref));
          ++ran;
        }
      }
    }
  }
  if (ran == 0) GTEST_SKIP() << "FLASHBUF_DECODE_INSTANTIATIONS is empty";
}

// Paged and contiguous caches run the same tiles in the same order: identical bits.
TEST(DecodeGpu, PagedMatchesContiguousBitExactly) {
  FLASHBUF_REQUIRE_GPU();
  int ran = 0;
  for (const Case& base : feature_cases()) {
    if (!decode_built(base.dtype, base.d)) continue;
    ++ran;
    const Inputs in = make_inputs(base, 99);
    for (const SplitRun run : {SplitRun{1}, SplitRun{4}, SplitRun{4, Merge::cluster}}) {
      SCOPED_TRACE(base.describe() + " " + run.describe());
      DeviceCase contiguous(base, in, false, 5), paged(base, in, true, 5);
      bool planned = false;
      ASSERT_NO_THROW(planned = contiguous.make_plan(run));
      if (!planned) continue;
      ASSERT_NO_THROW(paged.make_plan(run));
      ASSERT_TRUE(contiguous.run());
      ASSERT_TRUE(paged.run());
      const auto oc = contiguous.o.download<std::uint16_t>(), op = paged.o.download<std::uint16_t>();
      const auto lc = contiguous.lse.download<std::uint32_t>(), lp = paged.lse.download<std::uint32_t>();
      std::size_t diff = 0, first = 0;
      for (std::size_t i = 0; i < oc.size(); ++i) {
        if (oc[i] != op[i] && diff++ == 0) first = i;
      }
      EXPECT_EQ(diff, 0u) << diff << " o elements differ between paged and contiguous; first at storage index " << first;
      EXPECT_TRUE(lc == lp) << "lse differs between paged and contiguous";
    }
  }
  if (ran == 0) GTEST_SKIP() << "no feature case's kernel is in FLASHBUF_DECODE_INSTANTIATIONS";
}

// Split against unsplit on a long-ish sequence: both near the reference and near each other.
TEST(DecodeGpu, SplitMatchesUnsplit) {
  FLASHBUF_REQUIRE_GPU();
  DECODE_REQUIRE_KERNEL(DType::bf16, 128);
  Case c{"split_vs_unsplit"};
  c.hq = 32, c.hkv = 8, c.lens = {4000, 1, 0, 2500};
  const Inputs in = make_inputs(c, 7);
  const Reference ref = reference_outputs(c, in, c.lens);
  DeviceCase one(c, in, false, 1);
  ASSERT_NO_THROW(one.make_plan(1));
  ASSERT_TRUE(one.run());
  EXPECT_TRUE(check_outputs(one, c.lens, ref));
  const auto a = one.o.download<std::uint16_t>();
  for (const SplitRun run : {SplitRun{16}, SplitRun{16, Merge::cluster}, SplitRun{8, Merge::cluster}}) {
    SCOPED_TRACE(run.describe());
    DeviceCase many(c, in, false, 1);
    bool planned = false;
    ASSERT_NO_THROW(planned = many.make_plan(run));
    if (!planned) continue;
    ASSERT_TRUE(many.run());
    EXPECT_TRUE(check_outputs(many, c.lens, ref));
    const auto b = many.o.download<std::uint16_t>();
    double max_diff = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (a[i] == kPoison16 || b[i] == kPoison16) continue;
      max_diff = std::max(max_diff, double(std::fabs(from16(a[i], c.dtype) - from16(b[i], c.dtype))));
    }
    // Each is within the rule's bound of the float64 reference, so they are within twice it of each other.
    EXPECT_LE(max_diff, 2 * ref.o_bound(c.dtype)) << "split and unsplit outputs differ by " << max_diff;
  }
}

// Sequences whose length changes from 0 and 1 to more, and queries that see nothing.
TEST(DecodeGpu, EmptyAndSingleKeySequences) {
  FLASHBUF_REQUIRE_GPU();
  DECODE_REQUIRE_KERNEL(DType::bf16, 128);
  Case c{"empty_and_single"};
  c.hq = 8, c.hkv = 8, c.t = 3, c.lens = {0, 1, 0, 2, 1};
  c.capacity = 40, c.page = 4, c.mask = Mask::causal();
  const Inputs in = make_inputs(c, 11);
  const Reference ref = reference_outputs(c, in, c.lens);
  for (bool paged : {false, true}) {
    for (const SplitRun run : {SplitRun{1}, SplitRun{5}, SplitRun{5, Merge::cluster}}) {
      SCOPED_TRACE(std::string(paged ? "paged " : "contiguous ") + run.describe());
      DeviceCase dc(c, in, paged, 3);
      bool planned = false;
      ASSERT_NO_THROW(planned = dc.make_plan(run));
      if (!planned) continue;
      ASSERT_TRUE(dc.run());
      EXPECT_TRUE(check_outputs(dc, c.lens, ref));
    }
  }
}

// A CUDA graph captured once replays correctly after seqlens_k changes on the device.
TEST(DecodeGpu, GraphReplayWithChangedLengths) {
  FLASHBUF_REQUIRE_GPU();
  DECODE_REQUIRE_KERNEL(DType::bf16, 128);
  for (const SplitRun run : {SplitRun{1}, SplitRun{6}, SplitRun{6, Merge::cluster}}) {
    for (bool paged : {false, true}) {
      Case c{"graph"};
      c.hq = 16, c.hkv = 4, c.t = 2, c.lens = {100, 7, 0, 513};
      c.capacity = 900, c.page = 16, c.mask = Mask::causal();
      SCOPED_TRACE(std::string(paged ? "paged " : "contiguous ") + run.describe());
      const Inputs in = make_inputs(c, 21, /*poison_tail=*/false);  // longer lengths later
      DeviceCase dc(c, in, paged, 8);
      bool planned = false;
      ASSERT_NO_THROW(planned = dc.make_plan(run));
      if (!planned) continue;
      // Owned handles: an early return (a failed assertion) ends the capture and frees them,
      // so no stream is left capturing (later tests' legacy-stream work would then fail).
      struct Graph {
        cudaStream_t stream = nullptr;
        cudaGraph_t graph = nullptr;
        cudaGraphExec_t exec = nullptr;
        ~Graph() {
          cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
          if (stream != nullptr && cudaStreamIsCapturing(stream, &status) == cudaSuccess &&
              status != cudaStreamCaptureStatusNone) {
            cudaGraph_t partial = nullptr;
            cudaStreamEndCapture(stream, &partial);
            if (partial != nullptr) cudaGraphDestroy(partial);
          }
          if (exec != nullptr) cudaGraphExecDestroy(exec);
          if (graph != nullptr) cudaGraphDestroy(graph);
          if (stream != nullptr) {
            cudaStreamSynchronize(stream);
            cudaStreamDestroy(stream);
          }
          cudaGetLastError();
        }
      } g;
      CUDA_OK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
      const cudaStream_t stream = g.stream;
      const DecodeArgs args = dc.args(stream);
      // Warm-up outside capture (a first call may still set things up).
      ASSERT_NO_THROW(decode(dc.plan, args));
      CUDA_OK(cudaStreamSynchronize(stream));

      // Global mode: any unsafe runtime call decode makes while capturing fails the capture.
      CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
      std::string threw;
      try {
        decode(dc.plan, args);
      } catch (const std::exception& e) {
        threw = e.what();
      }
      const cudaError_t end = cudaStreamEndCapture(stream, &g.graph);
      ASSERT_TRUE(threw.empty()) << "decode threw during graph capture: " << threw;
      ASSERT_EQ(cudaSuccess, end) << "capturing decode failed: " << cudaGetErrorString(end)
                                  << " (decode made a call that is illegal during capture?)";
      CUDA_OK(cudaGraphInstantiate(&g.exec, g.graph, 0));

      const std::vector<std::vector<int>> length_sets = {{100, 7, 0, 513}, {899, 1, 64, 0}, {0, 0, 0, 3}, {450, 900, 2, 65}};
      for (const auto& lens : length_sets) {
        SCOPED_TRACE("lengths {" + std::to_string(lens[0]) + "," + std::to_string(lens[1]) + "," +
                     std::to_string(lens[2]) + "," + std::to_string(lens[3]) + "}");
        dc.lens.upload(lens);
        dc.poison();
        CUDA_OK(cudaDeviceSynchronize());
        CUDA_OK(cudaGraphLaunch(g.exec, stream));
        CUDA_OK(cudaStreamSynchronize(stream));
        Case now = c;
        now.lens = lens;
        const Reference ref = reference_outputs(now, in, lens);
        EXPECT_TRUE(check_outputs(dc, lens, ref));
      }
    }
  }
}

// Decode and the prefill path (flashbuf::attention on CUDA tensors) agree on the same data.
TEST(DecodeGpu, MatchesPrefill) {
  FLASHBUF_REQUIRE_GPU();
  DECODE_REQUIRE_KERNEL(DType::bf16, 128);
  if (!detail::prefill_instantiated(DType::bf16, 128, 128)) {
    GTEST_SKIP() << "prefill bf16 128/128 is not in FLASHBUF_INSTANTIATIONS of this build";
  }
  Case c{"decode_vs_prefill"};
  c.hq = 16, c.hkv = 4, c.t = 4, c.lens = {300, 4, 77};
  c.mask = Mask::causal();
  const Inputs in = make_inputs(c, 31, /*poison_tail=*/false);
  DeviceCase dc(c, in, false, 2);
  ASSERT_NO_THROW(dc.make_plan(0));
  ASSERT_TRUE(dc.run());
  const DecodeArgs d = dc.args();

  DevMem o2(DeviceCase::o_elems(c) * 2), lse2(std::size_t(c.batch()) * c.hq * c.t * 4);
  cudaMemset(o2.get(), 0xFF, o2.bytes());
  AttentionArgs a;
  a.q = d.q;
  a.k = d.k;
  a.v = d.v;
  a.o = d.o;
  a.o.data = static_cast<std::uint16_t*>(o2.get()) + DeviceCase::kGuard;
  a.lse = d.lse;
  a.lse.data = lse2.get();
  a.seqlens_k = d.seqlens_k;
  a.mask = c.mask;
  try {
    attention(a);
  } catch (const std::exception& e) {
    FAIL() << "the prefill path (flashbuf::attention on CUDA tensors) threw, so decode could not be "
              "compared with it: "
           << e.what();
  }
  CUDA_OK(cudaDeviceSynchronize());
  const auto od = dc.o.download<std::uint16_t>(), op = o2.download<std::uint16_t>();
  const auto ld = dc.lse.download<float>(), lp = lse2.download<float>();
  double max_diff = 0.0, max_lse_diff = 0.0;
  int nonfinite = 0;
  for (std::size_t i = 0; i < od.size(); ++i) {
    if (od[i] == kPoison16) continue;  // guard / padding
    const float x = from16(od[i], c.dtype), y = from16(op[i], c.dtype);
    if (!std::isfinite(y)) {
      ++nonfinite;
      continue;
    }
    max_diff = std::max(max_diff, double(std::fabs(x - y)));
  }
  for (std::size_t i = 0; i < lp.size(); ++i) {
    const float x = ld[DeviceCase::kGuard + i], y = lp[i];
    if (std::isinf(x) && std::isinf(y)) continue;
    max_lse_diff = std::max(max_lse_diff, double(std::fabs(x - y)));
  }
  EXPECT_EQ(nonfinite, 0) << "prefill left " << nonfinite << " non-finite outputs";
  // Each path is within the rule's bound of the float64 reference, so they are within twice it
  // of each other.
  const Reference ref = reference_outputs(c, in, c.lens);
  EXPECT_TRUE(check_outputs(dc, c.lens, ref));
  EXPECT_LE(max_diff, 2 * ref.o_bound(c.dtype)) << "decode and prefill outputs differ by up to " << max_diff;
  EXPECT_LE(max_lse_diff, 2 * ref.lse_bound()) << "decode and prefill LSEs differ by up to " << max_lse_diff;
}

// Out-of-range page indices on the device (not validated on the decode path) must not fault.
TEST(DecodeGpu, BadPageIndicesStayInBounds) {
  FLASHBUF_REQUIRE_GPU();
  DECODE_REQUIRE_KERNEL(DType::bf16, 128);
  Case c{"bad_pages"};
  c.hq = 8, c.hkv = 2, c.lens = {200, 64}, c.page = 16;
  const Inputs in = make_inputs(c, 41);
  DeviceCase dc(c, in, true, 4);
  ASSERT_NO_THROW(dc.make_plan(2));
  std::vector<std::int32_t> tab(std::size_t(c.batch()) * dc.max_pages);
  for (std::size_t i = 0; i < tab.size(); ++i) tab[i] = (i % 3 == 0) ? -1000 : (i % 3 == 1 ? 1 << 30 : int(i % dc.num_pages));
  dc.table.upload(tab);
  std::vector<int> bad_lens = {1 << 30, -5};  // clamped to [0, capacity]
  dc.lens.upload(bad_lens);
  ASSERT_TRUE(dc.run()) << "a bad page index or length must not crash the kernel";
}

// The paged kernel addresses rows with 32-bit byte strides: a page stride of 4 GiB or more is
// refused, naming k, before anything launches (O keeps its poison). Nothing is read: the view's
// stride is never dereferenced.
TEST(DecodeGpu, PagedStridesBeyond32BitsAreRefused) {
  FLASHBUF_REQUIRE_GPU();
  DECODE_REQUIRE_KERNEL(DType::bf16, 128);
  Case c{"huge_page_stride"};
  c.hq = 8, c.hkv = 2, c.lens = {40}, c.page = 16;
  const Inputs in = make_inputs(c, 43);
  DeviceCase dc(c, in, true, 4);
  ASSERT_TRUE(dc.make_plan(1));
  dc.poison();
  DecodeArgs a = dc.args();
  a.k.stride[0] = std::int64_t(1) << 31;  // elements: 4 GiB of bf16
  try {
    decode(dc.plan, a);
    ADD_FAILURE() << "a 4 GiB page stride was accepted";
  } catch (const ArgumentError& e) {
    EXPECT_EQ(e.argument(), "k") << e.what();
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto o = dc.o.download<std::uint16_t>();
  EXPECT_TRUE(std::all_of(o.begin(), o.end(), [](std::uint16_t x) { return x == 0xFFFF; })) << "O was written";
}

TEST(DecodeGpu, PlanRejectsUnsupportedShapes) {
  FLASHBUF_REQUIRE_GPU();
  DECODE_REQUIRE_KERNEL(DType::bf16, 128);
  DecodeProblem pr;
  pr.batch = 2, pr.q_per_seq = 1, pr.heads_q = 8, pr.heads_kv = 2, pr.head_dim = 96, pr.head_dim_v = 96;
  pr.max_seqlen_k = 100, pr.dtype = DType::bf16, pr.device = DeviceKind::cuda;
  EXPECT_THROW(plan_decode(pr), ArgumentError) << "head_dim 96 has no decode kernel";
  pr.head_dim = 128, pr.head_dim_v = 64;
  EXPECT_THROW(plan_decode(pr), ArgumentError) << "head_dim_v != head_dim";
  pr.head_dim_v = 128;
  DecodePlan plan;
  ASSERT_NO_THROW(plan = plan_decode(pr));
  EXPECT_GE(plan.num_splits, 1);
  if (plan.num_splits == 1) EXPECT_EQ(plan.workspace_bytes, 0u);
}

// The heuristic: few (sequence, head) items split into many, a full grid does not split.
TEST(DecodeGpu, PlanSplitsSmallBatchesOnly) {
  FLASHBUF_REQUIRE_GPU();
  DECODE_REQUIRE_KERNEL(DType::bf16, 128);
  DecodeProblem pr;
  pr.batch = 1, pr.q_per_seq = 1, pr.heads_q = 32, pr.heads_kv = 8, pr.head_dim = 128, pr.head_dim_v = 128;
  pr.max_seqlen_k = 128 * 1024, pr.dtype = DType::bf16, pr.device = DeviceKind::cuda;
  DecodePlan small, big;
  ASSERT_NO_THROW(small = plan_decode(pr));
  pr.batch = 128, pr.max_seqlen_k = 2048;
  ASSERT_NO_THROW(big = plan_decode(pr));
  std::printf("[ plan     ] B=1 Hkv=8 L=128k: %d splits, %d keys each, %zu workspace bytes; "
              "B=128 L=2k: %d splits\n",
              small.num_splits, small.keys_per_split, small.workspace_bytes, big.num_splits);
  EXPECT_GT(small.num_splits, 8);
  EXPECT_EQ(big.num_splits, 1);
  EXPECT_EQ(big.workspace_bytes, 0u);
  // Latency-bound: one tile per split, merged in clusters where the device has them.
  pr.batch = 1, pr.max_seqlen_k = 512;
  DecodePlan short_plan;
  ASSERT_NO_THROW(short_plan = plan_decode(pr));
  std::printf("[ plan     ] B=1 Hkv=8 L=512: %d splits, %zu workspace bytes\n", short_plan.num_splits,
              short_plan.workspace_bytes);
  if (cluster_limit(pr) >= 8) {
    EXPECT_EQ(short_plan.num_splits, 8);
    EXPECT_EQ(short_plan.workspace_bytes, 0u) << "the cluster merge needs no workspace";
  }
}

TEST(DecodeGpu, EmptyBatchDoesNothing) {
  FLASHBUF_REQUIRE_GPU();
  DECODE_REQUIRE_KERNEL(DType::fp16, 64);
  DecodeProblem pr;
  pr.batch = 0, pr.q_per_seq = 1, pr.heads_q = 8, pr.heads_kv = 2, pr.head_dim = 64, pr.head_dim_v = 64;
  pr.max_seqlen_k = 100, pr.dtype = DType::fp16, pr.device = DeviceKind::cuda;
  DecodePlan plan;
  ASSERT_NO_THROW(plan = plan_decode(pr));
  DevMem dummy(256);
  DecodeArgs a;
  a.q = strided_view(dummy.get(), DType::fp16, {0, 1, 8, 64}, {512, 512, 64, 1});
  a.k = strided_view(dummy.get(), DType::fp16, {0, 100, 2, 64}, {12800, 128, 64, 1});
  a.v = a.k;
  a.o = a.q;
  a.seqlens_k = strided_view(dummy.get(), DType::int32, {0}, {1});
  EXPECT_NO_THROW(decode(plan, a));
  EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());
}

// ---- merge_states ------------------------------------------------------------------------

struct MergeCase {
  DType dtype;
  int parts, tokens, heads, dv;
  int head_stride;  // elements between heads of o_parts and o (>= dv; padding is NaN / poison)
};

TEST(MergeStatesGpu, AgainstHostMerge) {
  FLASHBUF_REQUIRE_GPU();
  // Dv = 50 and 30 (not multiples of 4) take the kernel's scalar path; 40 parts > one warp.
  const MergeCase cases[] = {{DType::fp32, 1, 5, 3, 64, 64},  {DType::fp32, 5, 7, 3, 128, 128},
                             {DType::bf16, 40, 3, 2, 128, 128}, {DType::fp16, 3, 4, 5, 256, 264},
                             {DType::fp32, 6, 2, 3, 50, 52},    {DType::bf16, 33, 2, 2, 30, 40}};
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  for (const MergeCase& mc : cases) {
    SCOPED_TRACE(std::string(dtype_name(mc.dtype)) + " parts " + std::to_string(mc.parts) + " tokens " +
                 std::to_string(mc.tokens) + " heads " + std::to_string(mc.heads) + " dv " + std::to_string(mc.dv));
    const std::size_t es = dtype_size(mc.dtype);
    const std::size_t rows = std::size_t(mc.tokens) * mc.heads;
    const std::size_t hs = mc.head_stride;
    const std::size_t n_o = std::size_t(mc.parts) * rows * hs;  // storage elements of o_parts
    std::vector<float> o_val(n_o), lse_val(std::size_t(mc.parts) * rows);
    std::vector<unsigned char> o_bits(n_o * es);
    for (std::size_t r = 0; r < lse_val.size(); ++r) {
      const float u = uni(rng);
      lse_val[r] = u < 0.25f ? -kInf : 4.0f * normal(rng);
    }
    // Token 0, head 0: every part empty -> o = 0, lse = -inf.
    for (int s = 0; s < mc.parts; ++s) lse_val[std::size_t(s) * rows] = -kInf;
    for (std::size_t i = 0; i < n_o; ++i) {
      const std::size_t r = i / hs;  // (part, token, head) flat
      float x = normal(rng);
      // Parts with lse = -inf and the padding between heads are NaN: never to be read.
      if (lse_val[r] == -kInf || i % hs >= std::size_t(mc.dv)) x = std::numeric_limits<float>::quiet_NaN();
      if (mc.dtype == DType::fp32) {
        o_val[i] = x;
        std::memcpy(&o_bits[i * 4], &x, 4);
      } else {
        const std::uint16_t b = to16(x, mc.dtype);
        o_val[i] = from16(b, mc.dtype);
        std::memcpy(&o_bits[i * 2], &b, 2);
      }
    }
    // Host merge in double.
    std::vector<double> ref_o(rows * mc.dv, 0.0), ref_lse(rows, -std::numeric_limits<double>::infinity());
    for (std::size_t r = 0; r < rows; ++r) {
      double mx = -std::numeric_limits<double>::infinity();
      for (int s = 0; s < mc.parts; ++s) mx = std::max(mx, double(lse_val[s * rows + r]));
      if (std::isinf(mx)) continue;
      double sum = 0.0;
      for (int s = 0; s < mc.parts; ++s) sum += std::exp(double(lse_val[s * rows + r]) - mx);
      for (int s = 0; s < mc.parts; ++s) {
        if (lse_val[s * rows + r] == -kInf) continue;
        const double w = std::exp(double(lse_val[s * rows + r]) - mx) / sum;
        for (int d = 0; d < mc.dv; ++d) ref_o[r * mc.dv + d] += w * o_val[(s * rows + r) * hs + d];
      }
      ref_lse[r] = mx + std::log(sum);
    }
    // The naive merge in the kernel's precision (fp32, O rounded to the dtype): the error budget
    // of the twice-the-naive-error rule (reference/check.hpp).
    std::vector<double> low_o(rows * mc.dv, 0.0), low_lse(rows, -std::numeric_limits<double>::infinity());
    for (std::size_t r = 0; r < rows; ++r) {
      float mx = -kInf;
      for (int s = 0; s < mc.parts; ++s) mx = std::max(mx, lse_val[s * rows + r]);
      if (mx == -kInf) continue;
      float sum = 0.0f;
      std::vector<float> acc(mc.dv, 0.0f);
      for (int s = 0; s < mc.parts; ++s) {
        if (lse_val[s * rows + r] == -kInf) continue;
        const float w = std::exp(lse_val[s * rows + r] - mx);
        sum += w;
        for (int d = 0; d < mc.dv; ++d) acc[d] += w * o_val[(s * rows + r) * hs + d];
      }
      for (int d = 0; d < mc.dv; ++d) {
        const float x = acc[d] / sum;
        low_o[r * mc.dv + d] = mc.dtype == DType::fp32 ? x : from16(to16(x, mc.dtype), mc.dtype);
      }
      low_lse[r] = mx + std::log(sum);
    }
    constexpr std::size_t kGuardBytes = 256;
    DevMem d_parts(o_bits.size()), d_lse_parts(lse_val.size() * 4);
    DevMem d_o(rows * hs * es + 2 * kGuardBytes), d_lse(rows * 4 + 2 * kGuardBytes);
    d_parts.upload(o_bits);
    d_lse_parts.upload(lse_val);
    cudaMemset(d_o.get(), 0xFF, d_o.bytes());
    cudaMemset(d_lse.get(), 0xFF, d_lse.bytes());
    MergeStatesArgs a;
    a.o_parts = strided_view(d_parts.get(), mc.dtype, {mc.parts, mc.tokens, mc.heads, mc.dv},
                             {std::int64_t(rows * hs), std::int64_t(mc.heads * hs), std::int64_t(hs), 1});
    a.lse_parts = strided_view(d_lse_parts.get(), DType::fp32, {mc.parts, mc.tokens, mc.heads},
                               {std::int64_t(rows), mc.heads, 1});
    a.o = strided_view(static_cast<unsigned char*>(d_o.get()) + kGuardBytes, mc.dtype, {mc.tokens, mc.heads, mc.dv},
                       {std::int64_t(mc.heads * hs), std::int64_t(hs), 1});
    a.lse = strided_view(static_cast<unsigned char*>(d_lse.get()) + kGuardBytes, DType::fp32, {mc.tokens, mc.heads},
                         {mc.heads, 1});
    try {
      merge_states(a);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "merge_states threw: " << e.what();
      continue;
    }
    CUDA_OK(cudaDeviceSynchronize());
    const auto ob = d_o.download<unsigned char>();
    const auto lb = d_lse.download<float>();
    std::vector<double> got_o(rows * mc.dv), got_lse(rows);
    int bad = 0;
    std::ostringstream msg;
    int padding_written = 0;
    for (std::size_t i = 0; i < rows * hs; ++i) {
      const std::size_t r = i / hs, d = i % hs;
      double got;
      bool poison;
      if (mc.dtype == DType::fp32) {
        float f;
        std::uint32_t bits;
        std::memcpy(&f, &ob[kGuardBytes + i * 4], 4);
        std::memcpy(&bits, &ob[kGuardBytes + i * 4], 4);
        got = f;
        poison = bits == 0xFFFFFFFFu;
      } else {
        std::uint16_t b;
        std::memcpy(&b, &ob[kGuardBytes + i * 2], 2);
        got = from16(b, mc.dtype);
        poison = b == kPoison16;
      }
      if (d >= std::size_t(mc.dv)) {
        if (!poison) ++padding_written;
        continue;
      }
      got_o[r * mc.dv + d] = got;
    }
    const reference::Comparison co =
        reference::compare(got_o, ref_o, low_o, reference::default_atol(mc.dtype), "o (row, d row-major)");
    if (!co.ok) {
      ++bad;
      msg << "\n  " << co.detail;
    }
    if (padding_written) {
      bad += padding_written;
      msg << "\n  " << padding_written << " padding elements between heads were written";
    }
    for (std::size_t r = 0; r < rows; ++r) got_lse[r] = lb[kGuardBytes / 4 + r];
    const reference::Comparison cl = reference::compare(got_lse, ref_lse, low_lse, reference::kLseAtol, "lse (row)");
    if (!cl.ok) {
      ++bad;
      msg << "\n  " << cl.detail;
    }
    for (std::size_t i = 0; i < kGuardBytes; ++i) {
      if (ob[i] != 0xFF || ob[ob.size() - 1 - i] != 0xFF) {
        ++bad;
        msg << "\n  o guard byte written";
        break;
      }
    }
    EXPECT_EQ(bad, 0) << bad << " mismatches" << msg.str();
  }
}

}  // namespace
}  // namespace flashbuf::decode_test
