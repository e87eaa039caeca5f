// The `flashbuf` command line: shared options, progress, devices, inputs, the CPU's ceilings
// (see cli.hpp). The CUDA-specific parts live in cli_gpu.cpp.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <system_error>
#include <thread>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "cpu/tile_gemm.hpp"
#include "flashbuf/core/numeric.hpp"
#include "reference/reference.hpp"

namespace flashbuf::cli {

// ---- options shared by the subcommands ----------------------------------------------------

void add_backend_option(CLI::App& command, std::string& backend) {
  command.add_option("--backend", backend, "where the problems run: the GPU when one is usable (auto), or cpu, gpu")
      ->check(CLI::IsMember({"auto", "cpu", "gpu"}))
      ->capture_default_str();
}

const CLI::Validator& decimal_int64() {
  static const CLI::Validator validator(
      [](std::string& text) -> std::string {
        const char* first = text.data() + (!text.empty() && text[0] == '-' ? 1 : 0);
        const char* last = text.data() + text.size();
        if (first == last || !std::all_of(first, last, [](char c) { return c >= '0' && c <= '9'; })) {
          return "expected a decimal integer, got '" + text + "'";
        }
        std::int64_t value = 0;
        if (std::from_chars(text.data(), last, value).ec == std::errc::result_out_of_range) {
          return "value " + text + " is outside the int64 range";
        }
        text = std::to_string(value);  // no leading zeros left for CLI11 to read as octal
        return {};
      },
      "");
  return validator;
}

void add_seed_option(CLI::App& command, std::int64_t& seed, const char* what) {
  command.add_option("--seed", seed, std::string("master seed of the random inputs; 0 picks a fresh one, printed so that ") + what)
      ->transform(decimal_int64())
      ->check(CLI::Range(std::int64_t{0}, std::numeric_limits<std::int64_t>::max()));
}

// ---- progress ------------------------------------------------------------------------------

namespace {
double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

Progress::Progress(std::string what, std::int64_t total)
    : what_(std::move(what)), total_(total), tty_(isatty(STDERR_FILENO) != 0) {}

Progress::~Progress() { done(); }

void Progress::step(const std::string& detail) {
  ++count_;
  std::string line = "[" + what_ + " " + std::to_string(count_) + "/" + std::to_string(total_) + "]";
  if (!detail.empty()) line += " " + detail;
  if (!tty_) {
    const double now = steady_seconds();
    if (now - last_line_s_ < 1.0 && count_ != total_) return;
    last_line_s_ = now;
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
    return;
  }
  if (line.size() > 100) line.resize(100);
  std::fprintf(stderr, "\r%s\033[K", line.c_str());  // \033[K clears the rest of the old line
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::done() {
  if (!drawn_) return;
  drawn_ = false;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

// ---- devices -------------------------------------------------------------------------------

Device resolve_device(const std::string& choice) {
  if (choice == "cpu") return Device::cpu;
  if (choice == "gpu") {
    if (!cuda_available()) {
      // The library's own account of why: no CUDA in this build (and why), or no driver or device.
      std::string why;
      try {
        cuda_device_info(0);
        why = "no usable CUDA GPU";
      } catch (const std::exception& e) {
        why = e.what();
      }
      throw UsageError("--backend gpu: " + why);
    }
    return Device::gpu;
  }
  if (choice == "auto") return cuda_available() ? Device::gpu : Device::cpu;
  throw UsageError("--backend: expected auto, cpu or gpu, got '" + choice + "'");
}

const char* device_label(Device device) { return device == Device::gpu ? "gpu" : "cpu"; }

// ---- inputs --------------------------------------------------------------------------------

void fast_fill(reference::HostTensor& t, std::uint64_t seed) {
  // 4096 unit-normal values rounded to the dtype, picked by a xorshift stream: about 1 ns per
  // element, against ~20 for a normal draw, which matters for multi-GiB decode caches.
  constexpr int kTable = 4096;
  reference::Rng rng(seed);
  std::vector<std::uint32_t> table(kTable);
  for (auto& bits : table) {
    const float x = static_cast<float>(rng.normal());
    switch (t.dtype()) {
      case DType::bf16: bits = float_to_bf16(x); break;
      case DType::fp16: bits = float_to_fp16(x); break;
      default: bits = float_bits(x); break;
    }
  }
  const std::int64_t n = t.numel();
  const std::int64_t last = t.shape().back();
  const std::int64_t row_stride = t.rank() > 1 ? t.strides()[t.rank() - 2] : last;
  const unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  const std::int64_t rows = last > 0 ? n / last : 0;
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + w + 1;
      for (std::int64_t r = w; r < rows; r += workers) {
        for (std::int64_t c = 0; c < last; ++c) {
          state ^= state << 13;
          state ^= state >> 7;
          state ^= state << 17;
          const std::uint32_t bits = table[state & (kTable - 1)];
          if (dtype_size(t.dtype()) == 2) {
            static_cast<std::uint16_t*>(t.data())[r * row_stride + c] = static_cast<std::uint16_t>(bits);
          } else {
            static_cast<std::uint32_t*>(t.data())[r * row_stride + c] = bits;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
}

void fast_fill_inputs(reference::AttentionTensors& t, std::uint64_t seed) {
  fast_fill(t.q, seed);
  fast_fill(t.k, seed + 1);
  fast_fill(t.v, seed + 2);
}

// ---- ceilings ------------------------------------------------------------------------------

namespace {

// Peak multiply-add rate of this build's vector code: every worker runs independent
// multiply-adds on 16 accumulator vectors (no dependency chains longer than the FP latency
// hides), which the compiler vectorises with the same instruction set as the CPU backend.
double measure_cpu_flops(int workers) {
  constexpr int kLanes = 128;  // 16 vectors of 8 floats
  constexpr int kIters = 2'000'000;
  std::atomic<long long> total{0};
  auto body = [&] {
    alignas(64) float acc[kLanes];
    for (int i = 0; i < kLanes; ++i) acc[i] = 1.0f + i * 1e-3f;
    const float a = 0.999999f, b = 1e-7f;
    for (int it = 0; it < kIters; ++it) {
      for (int i = 0; i < kLanes; ++i) acc[i] = acc[i] * a + b;
    }
    float sink = 0;
    for (float x : acc) sink += x;
    total += static_cast<long long>(sink) & 1;  // keep the loop alive
  };
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) threads.emplace_back(body);
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return 2.0 * kLanes * double(kIters) * workers / seconds;
}

// Read bandwidth: every worker sums its share of a 256 MiB buffer, best of three passes.
double measure_cpu_read_bandwidth(int workers) {
  const std::size_t n = (256u << 20) / sizeof(float);
  std::vector<float> data(n, 1.0f);
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    std::atomic<long long> sink{0};
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int w = 0; w < workers; ++w) {
      threads.emplace_back([&, w] {
        float s[16] = {};
        const std::size_t begin = n * w / workers, end = n * (w + 1) / workers;
        for (std::size_t i = begin; i + 16 <= end; i += 16) {
          for (int j = 0; j < 16; ++j) s[j] += data[i + j];
        }
        float total = 0;
        for (float x : s) total += x;
        sink += static_cast<long long>(total);
      });
    }
    for (auto& t : threads) t.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, n * sizeof(float) / seconds);
  }
  return best;
}

}  // namespace

Ceilings machine_ceilings(Device device) {
  if (device == Device::gpu) return gpu_ceilings();
  const int workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // The CPU backend's own tile products (oneDNN, 128^3, bf16 where the CPU has bf16 products).
  const double per_core = detail::cpu::tile_gemm_ceiling_flops(true, 1);
  const double flops = detail::cpu::tile_gemm_ceiling_flops(true, workers);
  const double bw = measure_cpu_read_bandwidth(workers);
  char how[256];
  std::snprintf(how, sizeof how,
                "CPU ceilings measured now: %d threads x the CPU backend's oneDNN tile products "
                "(%.1f GFLOP/s on one, %.1f on all), %.1f GB/s read",
                workers, per_core / 1e9, flops / 1e9, bw / 1e9);
  return {flops, bw, how, 0, 0};
}

double attention_flops(const reference::ProblemSpec& s) {
  double total = 0;
  for (int b = 0; b < s.batch; ++b) {
    // Visible (query, key) pairs: exact count under any mask (cheap: one interval per query).
    double pairs = 0;
    const int sq = s.q_len(b), sk = s.k_len(b);
    for (int i = 0; i < sq; ++i) {
      const long diag = long(i) + sk - sq;
      long lo = 0, hi = sk;  // [lo, hi)
      if (s.mask.kind == MaskKind::causal) hi = std::min<long>(hi, diag + 1);
      if (s.mask.kind == MaskKind::sliding_window) {
        if (s.mask.window_left >= 0) lo = std::max<long>(lo, diag - s.mask.window_left);
        if (s.mask.window_right >= 0) hi = std::min<long>(hi, diag + s.mask.window_right + 1);
      }
      pairs += std::max<long>(0, hi - lo);
    }
    total += 2.0 * pairs * (s.head_dim + s.head_dim_v) * s.heads_q;
  }
  return total;
}

double decode_kv_bytes(const reference::ProblemSpec& s) {
  double keys = 0;
  for (int b = 0; b < s.batch; ++b) keys += s.k_len(b);
  return keys * s.heads_kv * (s.head_dim + s.head_dim_v) * double(dtype_size(s.dtype));
}

// ---- one checked (and optionally timed) run ------------------------------------------------

Measurement measure(Device device, const reference::ProblemSpec& spec, reference::AttentionTensors& t,
                    bool as_decode, int warmup, int reps, reference::Rng& rng, int sample) {
  Measurement m;
  DecodePlan plan;
  if (as_decode) {
    plan = plan_decode(reference::decode_problem(spec, device == Device::gpu ? DeviceKind::cuda : DeviceKind::cpu));
  }
  std::unique_ptr<DeviceTensors> dev;
  if (device == Device::gpu) dev = std::make_unique<DeviceTensors>(t, plan.workspace_bytes);
  const DeviceKind kind = device == Device::gpu ? DeviceKind::cuda : DeviceKind::cpu;
  const reference::TensorPointers* ptrs = dev ? &dev->pointers() : nullptr;
  std::function<void()> call;
  if (as_decode) {
    DecodeArgs args = reference::bind_decode(spec, t, kind, ptrs);
    if (dev) args.workspace = dev->workspace();
    call = [args, plan, &m] { m.backend = decode(plan, args); };
  } else {
    const AttentionArgs args = reference::bind(spec, t, kind, ptrs);
    call = [args, &m] { m.backend = attention(args); };
  }
  // The checked run: outputs start poisoned, so anything left unwritten shows up.
  call();
  if (dev) dev->download_outputs(t);
  if (sample <= 0) {
    m.check = reference::check_attention(spec, t);
  } else {
    const std::vector<reference::RowId> rows = reference::sample_rows(spec, rng, sample);
    m.check = reference::check_attention(spec, t, &rows);
  }
  for (int i = 0; i < warmup; ++i) call();
  if (reps > 0) m.ms = median_time_ms(device, reps, call);
  return m;
}

}  // namespace flashbuf::cli
