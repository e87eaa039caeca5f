// The `flashbuf` command line: what its subcommands (run, verify, bench) share — option
// parsing with usage errors (exit status 2), the progress line, where a problem runs (CPU,
// or GPU with device copies of the host tensors), timing, and the machine's ceilings.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "flashbuf/flashbuf.hpp"
#include "reference/check.hpp"
#include "reference/spec.hpp"

namespace flashbuf::cli {

// Bad command-line arguments: main prints the one-line reason and exits with status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "--name value" and "--flag" options after the subcommand. Every option must be consumed by
// the subcommand (get/flag); anything left over is a usage error naming it.
class Options {
 public:
  Options(std::string command, const std::vector<std::string>& args,
          const std::vector<std::string>& flags_without_value);
  bool flag(const std::string& name);
  std::string get(const std::string& name, const std::string& fallback);
  long long get_int(const std::string& name, long long fallback, long long lo, long long hi);
  void finish() const;  // throws UsageError for unknown options
  const std::string& command() const { return command_; }

 private:
  std::string command_;
  std::map<std::string, std::string> values_;
  std::map<std::string, bool> used_;
};

// A one-line counter on stderr, redrawn in place ("\r"), shown only when stderr is a terminal.
// done() clears the line (before printing results); a later step() draws it again.
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

// The machine's ceilings, for "share of the ceiling" figures.
struct Ceilings {
  double flops;           // FLOP/s
  double bytes_per_s;     // read bandwidth
  std::string how;        // one line saying where the numbers come from
};
Ceilings machine_ceilings(Device device);

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

int cmd_run(const std::vector<std::string>& args);
int cmd_verify(const std::vector<std::string>& args);
int cmd_bench(const std::vector<std::string>& args, const std::string& command_line);

}  // namespace flashbuf::cli
