// `flashbuf bench`: the grid of BENCH.md, flashbuf's own times, JSON in BENCH.md's schema with
// the anchor fields (fa2, cudnn) null — bench/ (the Python harness) fills them in the same
// process on the GPU machine. Each row's output is also checked on a sample of rows against
// the float64 reference (max_abs_err). On the CPU the full grid would take hours, so the
// default there is a quick subset at 1/8 of the tokens (the rows say their real sizes).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>

#include "cli.hpp"

namespace flashbuf::cli {
namespace {

constexpr const char* kHelp =
    "usage: flashbuf bench [--out FILE] [--backend auto|cpu|gpu] [--quick | --full]\n"
    "                      [--kind prefill|decode|all] [--seed S]\n"
    "\n"
    "Times the benchmark grid of BENCH.md and writes JSON in its schema (to FILE, or stdout):\n"
    "  prefill: bf16, 16k tokens per batch (B = 16384/S), hidden 2048 (H = 2048/D),\n"
    "           S in 512..16k, D in 64/128/256, causal and not\n"
    "  decode:  bf16, D 128, one query, Hq/Hkv in 32/8, 64/8, 32/32, B in 1..128,\n"
    "           KV 512..128k (B*KV*Hkv <= 16M), contiguous and paged (16, 64; shuffled pages)\n"
    "Anchor fields (fa2, cudnn) are null: bench/ fills them. GPU times: median of CUDA-event\n"
    "timed runs. --quick (the CPU default) runs a subset with 2k tokens per prefill batch and\n"
    "short caches; --full forces the whole grid.\n";

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

std::string json_number(double x) {
  if (!std::isfinite(x)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
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

}  // namespace

int cmd_bench(const std::vector<std::string>& args, const std::string& command_line) {
  Options options("bench", args, {"help", "quick", "full"});
  if (options.flag("help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  const Device device = resolve_device(options.get("backend", "auto"));
  const bool quick_flag = options.flag("quick"), full_flag = options.flag("full");
  if (quick_flag && full_flag) throw UsageError("--quick and --full exclude each other");
  const bool quick = quick_flag || (!full_flag && device == Device::cpu);
  const std::string kind = options.get("kind", "all");
  if (kind != "all" && kind != "prefill" && kind != "decode") {
    throw UsageError("--kind expects prefill, decode or all, got '" + kind + "'");
  }
  const std::string out_path = options.get("out", "");
  const std::uint64_t seed_arg = static_cast<std::uint64_t>(options.get_int("seed", 0, 0, INT64_MAX));
  options.finish();
  std::unique_ptr<std::ofstream> file;
  if (!out_path.empty()) {
    file = std::make_unique<std::ofstream>(out_path);
    if (!*file) throw UsageError("--out: cannot write '" + out_path + "'");
  }
  reference::Rng rng(seed_arg ? seed_arg : reference::Rng::fresh_seed());

  const Ceilings ceilings = machine_ceilings(device);
  const std::vector<Row> rows = grid(quick, kind);
  std::fprintf(stderr, "flashbuf bench on the %s: %zu rows%s\n", device_label(device), rows.size(),
               quick ? " (quick subset)" : "");
  std::ostringstream json;
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const std::string machine = device == Device::gpu ? gpu_name() : "CPU (" + std::to_string(threads) + " threads)";
  const std::string commit = git_commit();
  json << "{\n  \"meta\": {\"gpu\": " << json_string(machine) << ", \"commit\": "
       << (commit.empty() ? "null" : json_string(commit)) << ", \"command\": " << json_string(command_line)
       << ", \"torch\": null, \"cudnn\": null, \"date\": " << json_string(today())
       << ", \"ceilings\": {\"gemm_bf16_tflops\": " << json_number(ceilings.flops / 1e12)
       << ", \"read_tbs\": " << json_number(ceilings.bytes_per_s / 1e12) << "}, \"ceilings_source\": "
       << json_string(ceilings.how) << ", \"quick\": " << (quick ? "true" : "false") << "},\n  \"rows\": [\n";

  Progress progress("bench", static_cast<std::int64_t>(rows.size()));
  bool all_ok = true;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const reference::ProblemSpec& spec = rows[i].spec;
    const bool decode_row = rows[i].decode;
    progress.step(spec.describe());
    reference::AttentionTensors t = reference::make_tensors(spec, rng, /*fill_inputs=*/false);
    fast_fill_inputs(t, rng.seed() + i);
    // GPU: enough runs for a stable median; CPU: prefill rows take seconds, so one.
    const int warmup = device == Device::gpu ? (decode_row ? 10 : 3) : 0;
    const int reps = device == Device::gpu ? (decode_row ? 50 : 10) : (decode_row ? 3 : 1);
    const Measurement m = measure(device, spec, t, decode_row, warmup, reps, rng, 8);
    all_ok = all_ok && m.check.ok;
    const char* kernel = decode_row ? (device == Device::gpu ? "decode" : "cpu") : backend_name(m.backend);
    json << "    {\"kind\": \"" << (decode_row ? "decode" : "prefill") << "\", \"dtype\": \"" << dtype_name(spec.dtype)
         << "\", \"b\": " << spec.batch << ", \"hq\": " << spec.heads_q << ", \"hkv\": " << spec.heads_kv
         << ", \"sq\": " << spec.seqlen_q << ", \"sk\": " << spec.seqlen_k << ", \"d\": " << spec.head_dim
         << ", \"dv\": " << spec.head_dim_v << ", \"causal\": " << (spec.mask.kind == MaskKind::causal ? "true" : "false")
         << ", \"page\": " << spec.page_size << ", \"kernel\": \"" << kernel << "\", ";
    if (decode_row) {
      json << "\"unit\": \"us\", \"flashbuf\": " << json_number(m.ms * 1e3)
           << ", \"fa2\": null, \"cudnn\": null, \"floor_us\": "
           << json_number(decode_kv_bytes(spec) / ceilings.bytes_per_s * 1e6);
    } else {
      json << "\"unit\": \"TFLOP/s\", \"flashbuf\": " << json_number(attention_flops(spec) / (m.ms * 1e-3) / 1e12)
           << ", \"fa2\": null, \"cudnn\": null";
    }
    json << ", \"max_abs_err\": " << json_number(m.check.o.max_abs_err) << "}" << (i + 1 < rows.size() ? "," : "")
         << "\n";
    if (!m.check.ok) {
      progress.done();
      std::fprintf(stderr, "flashbuf bench: row %zu (%s) failed its check: %s\n", i, spec.describe().c_str(),
                   m.check.summary().c_str());
    }
  }
  progress.done();
  json << "  ]\n}\n";
  if (file) {
    *file << json.str();
    std::fprintf(stderr, "wrote %zu rows to %s\n", rows.size(), out_path.c_str());
  } else {
    std::cout << json.str();
  }
  return all_ok ? 0 : 1;
}

}  // namespace flashbuf::cli
