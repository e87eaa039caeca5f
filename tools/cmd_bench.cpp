// `flashbuf bench`: the grid of docs/BENCH.md, flashbuf's own times: a table as rows finish,
// and JSON in BENCH.md's schema with the anchor fields (fa2, cudnn) null — bench/ (the Python
// harness) fills them in the same process on the GPU machine. Each row's output is also
// checked on a sample of rows against the float64 reference (max_abs_err). On the CPU the full
// grid would take hours, so the default there is a quick subset at 1/8 of the tokens (the rows
// say their real sizes).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli.hpp"

namespace flashbuf::cli {
namespace {

constexpr const char* kFooter =
    "Times the benchmark grid of docs/BENCH.md; prints a table as rows finish and, with --out,\n"
    "writes JSON in its schema:\n"
    "  prefill: bf16, 16k tokens per batch (B = 16384/S), hidden 2048 (H = 2048/D),\n"
    "           S in 512..16k, D in 64/128/256, causal and not\n"
    "  decode:  bf16, D 128, one query, Hq/Hkv in 32/8, 64/8, 32/32, B in 1..128,\n"
    "           KV 512..128k (B*KV*Hkv <= 16M), contiguous and paged (16, 64; shuffled pages)\n"
    "Shares of the ceiling are of this machine's ceilings, measured at start-up (the JSON's\n"
    "meta.ceilings and meta.ceilings_source). Anchor fields (fa2, cudnn) are null: bench/bench.py\n"
    "fills them. GPU times: median of CUDA-event timed runs. --quick (the CPU default) runs a\n"
    "subset with 2k tokens per prefill batch and short caches; --full forces the whole grid.";

struct Row {
  reference::ProblemSpec spec;
  bool decode;
};

std::vector<Row> grid(bool quick, const std::string& kind) {
  std::vector<Row> rows;
  if (kind != "decode") {
    const int tokens = quick ? 2048 : 16384;
    const std::vector<int> seqs = quick ? std::vector<int>{512, 1024, 2048} : std::vector<int>{512, 1024, 2048, 4096, 8192, 16384};
    const std::vector<int> dims = quick ? std::vector<int>{64, 128} : std::vector<int>{64, 128, 256};
    for (bool causal : {false, true}) {
      for (int d : dims) {
        for (int s : seqs) {
          reference::ProblemSpec p;
          p.dtype = DType::bf16;
          p.batch = tokens / s;
          p.seqlen_q = p.seqlen_k = s;
          p.heads_q = p.heads_kv = 2048 / d;
          p.head_dim = p.head_dim_v = d;
          p.mask = causal ? Mask::causal() : Mask::none();
          p.lse = false;
          rows.push_back({p, false});
        }
      }
    }
  }
  if (kind != "prefill") {
    struct Heads { int q, kv; };
    const std::vector<Heads> heads = quick ? std::vector<Heads>{{32, 8}} : std::vector<Heads>{{32, 8}, {64, 8}, {32, 32}};
    const std::vector<int> batches = quick ? std::vector<int>{1, 8} : std::vector<int>{1, 8, 32, 128};
    const std::vector<int> lens = quick ? std::vector<int>{512, 2048, 8192} : std::vector<int>{512, 2048, 8192, 32768, 131072};
    const std::vector<int> pages = quick ? std::vector<int>{0, 16} : std::vector<int>{0, 16, 64};
    for (Heads h : heads) {
      for (int b : batches) {
        for (int len : lens) {
          if (static_cast<std::int64_t>(b) * len * h.kv > (16ll << 20)) continue;
          for (int page : pages) {
            reference::ProblemSpec p;
            p.dtype = DType::bf16;
            p.batch = b;
            p.seqlen_q = 1;
            p.heads_q = h.q;
            p.heads_kv = h.kv;
            p.head_dim = p.head_dim_v = 128;
            p.lse = false;
            p.seqlen_k = len;
            p.k_lens.assign(b, len);
            if (page) {
              p.kv = reference::KvLayout::paged;
              p.page_size = page;
              p.spare_pages = 8;
            } else {
              p.use_seqlens_k = true;
            }
            rows.push_back({p, true});
          }
        }
      }
    }
  }
  return rows;
}

// Six significant digits, as measurements deserve; NaN and infinities become null.
nlohmann::ordered_json rounded(double x) {
  if (!std::isfinite(x)) return nullptr;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return std::strtod(buf, nullptr);
}

std::string git_commit() {
  if (const char* env = std::getenv("FLASHBUF_COMMIT")) return env;
  std::string sha;
  if (FILE* pipe = popen("git rev-parse HEAD 2>/dev/null", "r")) {
    char buf[128] = {};
    if (std::fgets(buf, sizeof buf, pipe)) sha = buf;
    pclose(pipe);
  }
  while (!sha.empty() && (sha.back() == '\n' || sha.back() == '\r')) sha.pop_back();
  return sha;
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

// Whether --out names a regular file or nothing yet (not following a symbolic link): only such
// a path is written through a temporary file renamed over it. Anything else (a pipe, a device,
// /dev/stdout, a link) is written in place, once, at the end.
bool replaceable(const std::string& path) {
  const auto status = std::filesystem::symlink_status(path);
  return status.type() == std::filesystem::file_type::not_found || std::filesystem::is_regular_file(status);
}

// --out is checked before the run without touching an existing file (a run that is stopped or
// fails leaves the previous results as they were) and without opening a pipe or a device.
void check_writable(const std::string& path) {
  if (!replaceable(path)) return;  // opened once, at the end
  const bool existed = std::filesystem::exists(path);
  if (!std::ofstream(path, std::ios::app)) throw UsageError("--out: cannot write '" + path + "'");
  if (!existed) std::filesystem::remove(path);
}

// The results replace a regular --out only once all of them are written: through a temporary
// file beside it, renamed over it. Either way a failed write (a full disk) is an error naming
// --out, not a success.
void write_results(const std::string& path, const std::string& text) {
  const bool replace = replaceable(path);
  const std::string target = replace ? path + ".partial" : path;
  {
    std::ofstream file(target, std::ios::trunc);
    file << text;
    file.flush();
    if (!file) {
      if (replace) std::filesystem::remove(target);
      throw std::runtime_error("--out: writing '" + target + "' failed");
    }
  }
  if (replace) std::filesystem::rename(target, path);
}

}  // namespace

CLI::App* add_bench_command(CLI::App& app, BenchOptions& o) {
  CLI::App* bench = app.add_subcommand("bench", "the benchmark grid of docs/BENCH.md: a table, and JSON results");
  bench->footer(kFooter);
  bench->add_option("--out", o.out, "write the JSON results to FILE ('-': stdout, the table then goes to stderr)")
      ->type_name("FILE")
      ->check(CLI::Validator([](std::string& name) { return name.empty() ? std::string("empty file name") : std::string(); },
                             ""));
  add_backend_option(*bench, o.backend);
  CLI::Option* quick = bench->add_flag("--quick", o.quick, "the quick subset (the default on the CPU)");
  CLI::Option* full = bench->add_flag("--full", o.full, "the whole grid (the default on the GPU)");
  quick->excludes(full);
  bench->add_option("--kind", o.kind, "which part of the grid")
      ->check(CLI::IsMember({"prefill", "decode", "all"}))
      ->capture_default_str();
  add_seed_option(*bench, o.seed, "inputs can be replayed");
  return bench;
}

int cmd_bench(const BenchOptions& options, const std::string& command_line) {
  const Device device = resolve_device(options.backend);
  const bool quick = options.quick || (!options.full && device == Device::cpu);
  const bool to_file = !options.out.empty() && options.out != "-";
  if (to_file) check_writable(options.out);
  // The table goes where the JSON does not.
  FILE* table = options.out == "-" ? stderr : stdout;
  const auto seed_arg = static_cast<std::uint64_t>(options.seed);
  reference::Rng rng(seed_arg ? seed_arg : reference::Rng::fresh_seed());

  const std::vector<Row> rows = grid(quick, options.kind);
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const std::string machine = device == Device::gpu ? gpu_name() : "CPU (" + std::to_string(threads) + " threads)";
  std::fprintf(stderr, "flashbuf bench on the %s (%s): %zu rows%s, seed %llu; measuring the ceilings\n",
               device_label(device), machine.c_str(), rows.size(), quick ? " (quick subset)" : "",
               static_cast<unsigned long long>(rng.seed()));
  const Ceilings ceilings = machine_ceilings(device);
  std::fprintf(table, "%s\n", ceilings.how.c_str());

  const std::string commit = git_commit();
  nlohmann::ordered_json meta = {
      {"gpu", machine},
      {"commit", commit.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(commit)},
      {"command", command_line},
      {"torch", nullptr},
      {"cudnn", nullptr},
      {"date", today()},
      {"ceilings", {{"gemm_bf16_tflops", rounded(ceilings.flops / 1e12)}, {"read_tbs", rounded(ceilings.bytes_per_s / 1e12)}}},
      {"ceilings_source", ceilings.how},
      {"quick", quick},
      {"seed", rng.seed()},
  };
  if (ceilings.peak_flops > 0 || ceilings.peak_bytes_per_s > 0) {
    meta["ceilings_from_properties"] = {{"gemm_bf16_tflops", rounded(ceilings.peak_flops / 1e12)},
                                        {"read_tbs", rounded(ceilings.peak_bytes_per_s / 1e12)}};
  }
  nlohmann::ordered_json json_rows = nlohmann::ordered_json::array();

  std::fprintf(table, "%-7s %-58s %-7s %12s %9s %10s  %s\n", "kind", "problem", "kernel", "result", "ceiling",
               "max err", "check");
  std::fflush(table);
  Progress progress("bench", static_cast<std::int64_t>(rows.size()));
  bool all_ok = true;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const reference::ProblemSpec& spec = rows[i].spec;
    const bool decode_row = rows[i].decode;
    progress.step(std::string(decode_row ? "decode " : "prefill ") + spec.describe());
    reference::AttentionTensors t = reference::make_tensors(spec, rng, /*fill_inputs=*/false);
    fast_fill_inputs(t, rng.seed() + i);
    // GPU: enough runs for a stable median; CPU: prefill rows take seconds, so one.
    const int warmup = device == Device::gpu ? (decode_row ? 10 : 3) : 0;
    const int reps = device == Device::gpu ? (decode_row ? 50 : 10) : (decode_row ? 3 : 1);
    const Measurement m = measure(device, spec, t, decode_row, warmup, reps, rng, 8);
    progress.done();
    all_ok = all_ok && m.check.ok;
    const char* kernel = decode_row ? (device == Device::gpu ? "decode" : "cpu") : backend_name(m.backend);
    nlohmann::ordered_json row = {
        {"kind", decode_row ? "decode" : "prefill"}, {"dtype", dtype_name(spec.dtype)},
        {"b", spec.batch}, {"hq", spec.heads_q}, {"hkv", spec.heads_kv}, {"sq", spec.seqlen_q},
        {"sk", spec.seqlen_k}, {"d", spec.head_dim}, {"dv", spec.head_dim_v},
        {"causal", spec.mask.kind == MaskKind::causal}, {"page", spec.page_size}, {"kernel", kernel},
    };
    char result[32], share[16];
    if (decode_row) {
      const double floor_us = decode_kv_bytes(spec) / ceilings.bytes_per_s * 1e6;
      row["unit"] = "us";
      row["flashbuf"] = rounded(m.ms * 1e3);
      row["fa2"] = nullptr;
      row["cudnn"] = nullptr;
      row["floor_us"] = rounded(floor_us);
      std::snprintf(result, sizeof result, "%.1f us", m.ms * 1e3);
      std::snprintf(share, sizeof share, "%.0f%%", 100.0 * floor_us / (m.ms * 1e3));
    } else {
      const double tflops = attention_flops(spec) / (m.ms * 1e-3) / 1e12;
      row["unit"] = "TFLOP/s";
      row["flashbuf"] = rounded(tflops);
      row["fa2"] = nullptr;
      row["cudnn"] = nullptr;
      // The CPU's rates are GFLOP/s; print them in units that show digits.
      if (tflops >= 1.0) {
        std::snprintf(result, sizeof result, "%.1f TF/s", tflops);
      } else {
        std::snprintf(result, sizeof result, "%.1f GF/s", tflops * 1e3);
      }
      std::snprintf(share, sizeof share, "%.0f%%", 100.0 * tflops * 1e12 / ceilings.flops);
    }
    row["max_abs_err"] = rounded(m.check.o.max_abs_err);
    json_rows.push_back(std::move(row));
    std::fprintf(table, "%-7s %-58s %-7s %12s %9s %10.2e  %s\n", decode_row ? "decode" : "prefill",
                 spec.describe().c_str(), kernel, result, share, m.check.o.max_abs_err, m.check.ok ? "ok" : "FAILED");
    std::fflush(table);
    if (!m.check.ok) {
      std::fprintf(stderr, "flashbuf bench: row %zu (%s) failed its check: %s\n", i, spec.describe().c_str(),
                   m.check.summary().c_str());
    }
  }
  progress.done();
  // One line per row, as the results files of record are laid out (diffs stay readable).
  std::ostringstream results;
  results << "{\n  \"meta\": " << meta.dump() << ",\n  \"rows\": [\n";
  for (std::size_t i = 0; i < json_rows.size(); ++i) {
    results << "    " << json_rows[i].dump() << (i + 1 < json_rows.size() ? "," : "") << "\n";
  }
  results << "  ]\n}\n";
  if (to_file) {
    write_results(options.out, results.str());
    std::fprintf(stderr, "wrote %zu rows to %s\n", rows.size(), options.out.c_str());
  } else if (options.out == "-") {
    std::cout << results.str();
  }
  return all_ok ? 0 : 1;
}

}  // namespace flashbuf::cli
