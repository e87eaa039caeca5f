// `flashbuf run`: the embedded default problems — one prefill, one decode — on the GPU when
// one is present, else on the CPU. Each is checked on a sample of rows against the float64
// reference, then timed; the output gives throughput and the share of the machine's ceiling.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "cli.hpp"

namespace flashbuf::cli {
namespace {

constexpr const char* kFooter =
    "Runs the default problems and checks a sample of output rows against a float64 reference:\n"
    "  GPU: prefill bf16 B=4 S=4096 H=16 D=128 causal; decode bf16 B=8 Hq/Hkv=32/8 D=128,\n"
    "       32768 keys per sequence in 16-token pages (shuffled)\n"
    "  CPU: prefill bf16 B=1 S=2048 Hq/Hkv=16/4 D=128 causal; decode bf16 B=8 Hq/Hkv=32/8\n"
    "       D=128, 4096 keys in 16-token pages\n"
    "Prints time, TFLOP/s (prefill) or GB/s of K/V read (decode) and the share of the ceiling\n"
    "of this machine, measured at start-up (GPU: a cuBLAS bf16 matrix product and a read of\n"
    "device memory, as docs/BENCH.md measures them; CPU: this build's vector loop).\n"
    "Exit status 0 when both results verify, 1 otherwise.";

reference::ProblemSpec default_prefill(Device device) {
  reference::ProblemSpec s;
  s.dtype = DType::bf16;
  s.mask = Mask::causal();
  s.head_dim = s.head_dim_v = 128;
  if (device == Device::gpu) {
    s.batch = 4; s.seqlen_q = s.seqlen_k = 4096; s.heads_q = s.heads_kv = 16;
  } else {
    // Sized to take about a second on two cores.
    s.batch = 1; s.seqlen_q = s.seqlen_k = 2048; s.heads_q = 16; s.heads_kv = 4;
  }
  return s;
}

reference::ProblemSpec default_decode(Device device) {
  reference::ProblemSpec s;
  s.dtype = DType::bf16;
  s.batch = 8; s.seqlen_q = 1; s.heads_q = 32; s.heads_kv = 8; s.head_dim = s.head_dim_v = 128;
  s.kv = reference::KvLayout::paged;
  s.page_size = 16;
  s.spare_pages = 16;
  s.k_lens.assign(s.batch, device == Device::gpu ? 32768 : 4096);
  return s;
}

}  // namespace

CLI::App* add_run_command(CLI::App& app, RunOptions& o) {
  CLI::App* run = app.add_subcommand("run", "run the default prefill and decode problems (GPU if present, else CPU), "
                                            "check them against a float64 reference, print time and throughput");
  run->footer(kFooter);
  add_backend_option(*run, o.backend);
  add_seed_option(*run, o.seed, "a run can be replayed");
  return run;
}

int cmd_run(const RunOptions& options) {
  const Device device = resolve_device(options.backend);
  const auto seed = static_cast<std::uint64_t>(options.seed);
  reference::Rng rng(seed ? seed : reference::Rng::fresh_seed());

  std::printf("flashbuf run on the %s%s (seed %llu)\n", device_label(device),
              device == Device::gpu ? (": " + gpu_name()).c_str() : "", static_cast<unsigned long long>(rng.seed()));
  const Ceilings ceilings = machine_ceilings(device);
  std::printf("  %s\n", ceilings.how.c_str());

  bool ok = true;
  constexpr int kSampleRows = 48;
  {
    const reference::ProblemSpec spec = default_prefill(device);
    Progress progress("run", 2);
    progress.step("prefill " + spec.describe());
    reference::Rng data(rng.seed());
    reference::AttentionTensors t = reference::make_tensors(spec, data);  // small: normal draws
    const int warmup = device == Device::gpu ? 3 : 0;
    const int reps = device == Device::gpu ? 20 : 1;
    const Measurement m = measure(device, spec, t, false, warmup, reps, rng, kSampleRows);
    progress.done();
    const double tflops = attention_flops(spec) / (m.ms * 1e-3) / 1e12;
    std::printf("prefill  %-44s %9.3f ms  %8.3f TFLOP/s  %5.1f%% of ceiling  [%s, %s]\n", spec.describe().c_str(), m.ms,
                tflops, 100.0 * tflops * 1e12 / ceilings.flops, backend_name(m.backend),
                m.check.ok ? "verified" : "FAILED");
    std::printf("         check of %d rows vs float64: %s\n", kSampleRows, m.check.summary().c_str());
    ok = ok && m.check.ok;
  }
  {
    const reference::ProblemSpec spec = default_decode(device);
    Progress progress("run", 1);
    progress.step("decode " + spec.describe());
    reference::AttentionTensors t = reference::make_tensors(spec, rng, /*fill_inputs=*/false);
    fast_fill_inputs(t, rng.seed() + 17);
    const int warmup = device == Device::gpu ? 10 : 1;
    const int reps = device == Device::gpu ? 100 : 5;
    const Measurement m = measure(device, spec, t, true, warmup, reps, rng, kSampleRows);
    progress.done();
    const double bytes = decode_kv_bytes(spec);
    const double gbs = bytes / (m.ms * 1e-3) / 1e9;
    std::printf("decode   %-44s %9.3f ms  %8.1f GB/s     %5.1f%% of ceiling  [%s, %s]\n", spec.describe().c_str(), m.ms,
                gbs, 100.0 * gbs * 1e9 / ceilings.bytes_per_s, backend_name(m.backend),
                m.check.ok ? "verified" : "FAILED");
    std::printf("         floor (K+V bytes / read ceiling) %.3f ms; check of %d rows vs float64: %s\n",
                bytes / ceilings.bytes_per_s * 1e3, kSampleRows, m.check.summary().c_str());
    ok = ok && m.check.ok;
  }
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace flashbuf::cli
