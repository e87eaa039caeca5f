// The `flashbuf` command line: what its subcommands (run, verify, bench) share — their options
// (parsed by CLI11 in main.cpp; usage errors exit with status 2), the progress lines, where a
// problem runs (CPU, or GPU with device copies of the host tensors), timing, and the machine's
// ceilings.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "flashbuf/flashbuf.hpp"
#include "reference/check.hpp"
#include "reference/spec.hpp"

namespace CLI {
class App;
class Validator;
}

namespace flashbuf::cli {

// Command-line arguments that parse but make no sense together or here (--backend gpu on a
// machine without one): main prints the one-line reason and exits with status 2, as it does
// for parse errors.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Progress of a long command on stderr. On a terminal one line is redrawn in place ("\r");
// on any other output (a pipe, a log file, CI) each step is a line of its own, at most one a
// second apart unless a step takes longer, so logs show progress without flooding.
// done() clears a redrawn line (before printing results); a later step() draws it again.
class Progress {
 public:
  Progress(std::string what, std::int64_t total);
  ~Progress();
  void step(const std::string& detail = "");
  void done();

 private:
  std::string what_;
  std::int64_t total_, count_ = 0;
  bool tty_;
  bool drawn_ = false;
  double last_line_s_ = -1e9;  // steady-clock seconds of the last line (not on a terminal)
};

// Where the problems run.
enum class Device { cpu, gpu };
Device resolve_device(const std::string& choice);  // "auto", "cpu", "gpu"
const char* device_label(Device device);

// Device copies of a problem's host tensors (GPU only; on the CPU the host tensors are used
// directly). Implemented in cli_gpu.cpp; without CUDA, constructing one throws.
class DeviceTensors {
 public:
  DeviceTensors(reference::AttentionTensors& host, std::size_t workspace_bytes = 0);
  ~DeviceTensors();
  DeviceTensors(const DeviceTensors&) = delete;
  DeviceTensors& operator=(const DeviceTensors&) = delete;
  const reference::TensorPointers& pointers() const { return ptrs_; }
  void* workspace() const { return workspace_; }
  void download_outputs(reference::AttentionTensors& host) const;  // o and lse back to the host
  void poison_outputs(reference::AttentionTensors& host) const;    // host poison -> device

 private:
  reference::TensorPointers ptrs_{};
  void* workspace_ = nullptr;
  std::vector<void*> allocations_;
};

// Median wall time of `reps` calls in ms. On the GPU each call is bracketed by CUDA events
// on the default stream (the stream the CLI passes), so host overhead between calls is not
// counted; on the CPU by steady_clock (the CPU backend returns when the work is done).
double median_time_ms(Device device, int reps, const std::function<void()>& call);
void device_synchronize(Device device);
std::string gpu_name();

// Fast random fill (normal values from a table, rounded to the dtype) for big benchmark
// inputs; the verification and tests use HostTensor::fill_normal.
void fast_fill(reference::HostTensor& t, std::uint64_t seed);
void fast_fill_inputs(reference::AttentionTensors& t, std::uint64_t seed);

// The machine's ceilings, for "share of the ceiling" figures, measured on the machine the
// command runs on (GPU: cli_gpu.cpp; CPU: cli_common.cpp).
struct Ceilings {
  double flops;           // FLOP/s (GPU: dense bf16 matrix rate; CPU: fp32 multiply-add rate)
  double bytes_per_s;     // read bandwidth
  std::string how;        // one line saying where the numbers come from
  double peak_flops = 0;       // GPU: what the device's properties promise (0 when unknown)
  double peak_bytes_per_s = 0;
};
Ceilings machine_ceilings(Device device);
Ceilings gpu_ceilings();  // the current CUDA device; cli_gpu.cpp

// FLOPs of an attention forward: 4·Sq·Sk·(D+Dv)/2 per head, halved again for causal Sq = Sk.
double attention_flops(const reference::ProblemSpec& spec);
// Bytes of K and V a decode step must read at least once.
double decode_kv_bytes(const reference::ProblemSpec& spec);

// Runs the spec on `device` (device copies made and freed here): one run whose output is
// checked against the float64 reference on `sample` random rows (all rows when sample <= 0),
// then `warmup` untimed runs and the median of `reps` timed ones (no timing when reps == 0).
struct Measurement {
  reference::AttentionCheck check;
  double ms = 0;
  Backend backend = Backend::automatic;
};
Measurement measure(Device device, const reference::ProblemSpec& spec, reference::AttentionTensors& tensors,
                    bool as_decode, int warmup, int reps, reference::Rng& rng, int sample);

// The subcommands. Each add_*_command registers its options on `app` (CLI11, tools/main.cpp
// parses) and returns the subcommand; cmd_* runs it once the arguments are parsed.
struct RunOptions {
  std::string backend = "auto";
  std::int64_t seed = 0;
};
struct VerifyOptions {
  std::string backend = "auto";
  int count = 4;
  std::int64_t seed = 0;
};
struct BenchOptions {
  std::string backend = "auto";
  std::string out;           // JSON file ("-": stdout, the table then goes to stderr)
  bool quick = false, full = false;
  std::string kind = "all";  // prefill, decode, all
  std::int64_t seed = 0;
};
CLI::App* add_run_command(CLI::App& app, RunOptions& options);
CLI::App* add_verify_command(CLI::App& app, VerifyOptions& options);
CLI::App* add_bench_command(CLI::App& app, BenchOptions& options);
int cmd_run(const RunOptions& options);
int cmd_verify(const VerifyOptions& options);
int cmd_bench(const BenchOptions& options, const std::string& command_line);

// The options every subcommand shares, registered the same way everywhere.
void add_backend_option(CLI::App& command, std::string& backend);
void add_seed_option(CLI::App& command, std::int64_t& seed, const char* what);
// Integer options in plain decimal that fits int64: CLI11 alone reads 010 as octal, 0x10 as
// hex and saturates a value past int64 to its maximum.
const CLI::Validator& decimal_int64();

}  // namespace flashbuf::cli
