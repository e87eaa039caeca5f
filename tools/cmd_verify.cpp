// `flashbuf verify`: random problems of every feature class against the float64 reference
// (every row, the 2x-same-precision error rule of reference/check.hpp, guard regions and
// unwritten-output detection). One line per feature class, then PASS or FAIL (exit 1).
// Problems derive from one master seed, printed at the start: --seed replays a run exactly.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "api/backends.hpp"
#include "cli.hpp"

namespace flashbuf::cli {
namespace {

constexpr const char* kFooter =
    "Runs N random problems (default 4) of each feature class against a float64 reference:\n"
    "dense, causal (incl. Sq != Sk), sliding window, softcap + scale, GQA/MQA, varlen with\n"
    "zero-length sequences, paged K/V (pages of 1, 3, 16, 256 tokens, shuffled pool), batch with\n"
    "seqlens_k, strided views and no LSE, odd sizes, decode (1..16 queries per sequence).\n"
    "dtypes cycle through bf16, fp16 and (CPU only) fp32. Every output row is checked:\n"
    "  max|out - ref| <= 2 * max|naive same-precision - ref| + atol.\n"
    "Prints one line per class and PASS/FAIL; exit status 1 on any failure.\n"
    "--seed replays a previous run exactly (its seed is printed at the start).";

using reference::KvLayout;
using reference::ProblemSpec;
using reference::Rng;

struct Dims {
  int d, dv;
};

// What the chosen device can run: on the GPU only instantiated head dims and bf16/fp16.
struct Capabilities {
  Device device;
  std::vector<DType> dtypes;
  std::vector<Dims> dims;          // prefill
  std::vector<Dims> decode_dims;   // decode
};

Capabilities capabilities(Device device) {
  Capabilities c{device, {}, {}, {}};
  if (device == Device::cpu) {
    c.dtypes = {DType::bf16, DType::fp16, DType::fp32};
    c.dims = {{16, 16}, {17, 33}, {32, 32}, {64, 64}, {80, 80}, {96, 96}, {128, 128}, {192, 128}, {256, 256}};
    c.decode_dims = c.dims;
    return c;
  }
  c.dtypes = {DType::bf16, DType::fp16};
  for (Dims d : {Dims{64, 64}, Dims{96, 96}, Dims{128, 128}, Dims{192, 128}, Dims{192, 192}, Dims{256, 256}}) {
    if (detail::prefill_instantiated(DType::bf16, d.d, d.dv) && detail::prefill_instantiated(DType::fp16, d.d, d.dv)) {
      c.dims.push_back(d);
    }
  }
  for (int d : {64, 128, 256}) {
    if (detail::decode_instantiated(DType::bf16, d) && detail::decode_instantiated(DType::fp16, d)) {
      c.decode_dims.push_back({d, d});
    }
  }
  if (c.dims.empty()) c.dims = {{128, 128}};
  if (c.decode_dims.empty()) c.decode_dims = {{128, 128}};
  return c;
}

// The common random part of every problem; each class then sets its feature.
ProblemSpec base(Rng& rng, const Capabilities& caps, int index, bool decode = false) {
  ProblemSpec s;
  s.dtype = caps.dtypes[index % caps.dtypes.size()];
  const auto& dims = decode ? caps.decode_dims : caps.dims;
  const Dims d = dims[rng.uniform_int(0, static_cast<int>(dims.size()) - 1)];
  s.head_dim = d.d;
  s.head_dim_v = d.dv;
  s.heads_kv = rng.uniform_int(1, 3);
  s.heads_q = s.heads_kv * (1 << rng.uniform_int(0, 2));
  s.batch = rng.uniform_int(1, 3);
  s.seqlen_q = rng.uniform_int(1, 160);
  s.seqlen_k = rng.uniform_int(1, 240);
  s.lse = true;
  return s;
}

Mask random_mask(Rng& rng) {
  switch (rng.uniform_int(0, 2)) {
    case 0: return Mask::none();
    case 1: return Mask::causal();
    default: return Mask::window(rng.uniform_int(0, 40), rng.uniform_int(-1, 10));
  }
}

struct FeatureClass {
  const char* name;
  bool decode;
  std::function<ProblemSpec(Rng&, const Capabilities&, int)> make;
};

std::vector<FeatureClass> feature_classes() {
  return {
      {"dense", false, [](Rng& r, const Capabilities& c, int i) { return base(r, c, i); }},
      {"causal", false,
       [](Rng& r, const Capabilities& c, int i) {
         ProblemSpec s = base(r, c, i);
         s.mask = Mask::causal();
         if (i % 3 == 2) s.seqlen_q = s.seqlen_k + r.uniform_int(1, 40);  // rows that see no key
         return s;
       }},
      {"sliding window", false,
       [](Rng& r, const Capabilities& c, int i) {
         ProblemSpec s = base(r, c, i);
         const int left = r.uniform_int(-1, 60);
         s.mask = Mask::window(left, left < 0 ? r.uniform_int(0, 20) : r.uniform_int(-1, 20));
         return s;
       }},
      {"softcap + scale", false,
       [](Rng& r, const Capabilities& c, int i) {
         ProblemSpec s = base(r, c, i);
         s.softcap = i % 2 ? 30.0f : 4.0f;
         s.softmax_scale = static_cast<float>(r.uniform(0.03, 0.3));
         s.input_stddev = 2.0;
         s.mask = random_mask(r);
         return s;
       }},
      {"gqa / mqa", false,
       [](Rng& r, const Capabilities& c, int i) {
         ProblemSpec s = base(r, c, i);
         s.heads_kv = r.uniform_int(1, 2);
         s.heads_q = s.heads_kv * r.uniform_int(2, 8);
         s.mask = random_mask(r);
         return s;
       }},
      {"varlen (zero-length seqs)", false,
       [](Rng& r, const Capabilities& c, int i) {
         ProblemSpec s = base(r, c, i);
         s.batch = r.uniform_int(2, 6);
         s.varlen_q = true;
         s.kv = KvLayout::varlen;
         reference::randomize_lengths(s, r, 0, 150, 0, 200);
         s.q_lens[r.uniform_int(0, s.batch - 1)] = 0;
         s.k_lens[r.uniform_int(0, s.batch - 1)] = 0;
         s.mask = random_mask(r);
         return s;
       }},
      {"paged (pages 1/3/16/256)", false,
       [](Rng& r, const Capabilities& c, int i) {
         static const int kPages[] = {1, 3, 16, 256};
         ProblemSpec s = base(r, c, i);
         s.kv = KvLayout::paged;
         s.page_size = kPages[i % 4];
         s.varlen_q = r.coin();
         reference::randomize_lengths(s, r, s.varlen_q ? 0 : s.seqlen_q, s.varlen_q ? 100 : s.seqlen_q, 0, 300);
         s.mask = random_mask(r);
         return s;
       }},
      {"seqlens_k", false,
       [](Rng& r, const Capabilities& c, int i) {
         ProblemSpec s = base(r, c, i);
         s.use_seqlens_k = true;
         reference::randomize_lengths(s, r, s.seqlen_q, s.seqlen_q, 0, s.seqlen_k);
         s.mask = random_mask(r);
         return s;
       }},
      {"strided views, no lse", false,
       [](Rng& r, const Capabilities& c, int i) {
         ProblemSpec s = base(r, c, i);
         s.pad = 8;  // row stride D + 8: non-contiguous, still 16-byte aligned
         s.lse = i % 2 == 0 ? false : true;
         s.mask = random_mask(r);
         return s;
       }},
      {"odd sizes", false,
       [](Rng& r, const Capabilities& c, int i) {
         static const int kSizes[] = {1, 2, 17, 63, 65, 127};
         ProblemSpec s = base(r, c, i);
         s.seqlen_q = kSizes[r.uniform_int(0, 5)];
         s.seqlen_k = kSizes[r.uniform_int(0, 5)];
         s.heads_kv = r.uniform_int(1, 3);
         s.heads_q = s.heads_kv * r.uniform_int(1, 3);  // group sizes 1, 2, 3
         s.mask = random_mask(r);
         return s;
       }},
      {"decode (1..16 queries)", true,
       [](Rng& r, const Capabilities& c, int i) {
         ProblemSpec s = base(r, c, i, /*decode=*/true);
         s.seqlen_q = i % 3 == 0 ? 1 : r.uniform_int(1, 16);
         s.batch = r.uniform_int(1, 6);
         s.seqlen_k = r.uniform_int(1, 600);
         if (r.coin()) {
           s.kv = KvLayout::paged;
           s.page_size = i % 2 ? 16 : r.uniform_int(1, 64);
         } else {
           s.use_seqlens_k = true;
         }
         reference::randomize_lengths(s, r, s.seqlen_q, s.seqlen_q, 0, s.seqlen_k);
         s.mask = r.coin() ? Mask::causal() : Mask::none();
         return s;
       }},
  };
}

}  // namespace

CLI::App* add_verify_command(CLI::App& app, VerifyOptions& o) {
  CLI::App* verify = app.add_subcommand("verify", "random problems of every feature against the float64 reference");
  verify->footer(kFooter);
  add_backend_option(*verify, o.backend);
  verify->add_option("--count", o.count, "random problems per feature class")
      ->transform(decimal_int64())
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  add_seed_option(*verify, o.seed, "a failing run can be replayed");
  return verify;
}

int cmd_verify(const VerifyOptions& options) {
  const Device device = resolve_device(options.backend);
  const int count = options.count;
  const auto seed_arg = static_cast<std::uint64_t>(options.seed);
  const std::uint64_t master = seed_arg ? seed_arg : Rng::fresh_seed() >> 1;

  const Capabilities caps = capabilities(device);
  const auto classes = feature_classes();
  std::printf("flashbuf verify on the %s: %d problems in each of %zu feature classes (seed %llu)\n",
              device_label(device), count, classes.size(), static_cast<unsigned long long>(master));
  Progress progress("verify", static_cast<std::int64_t>(count) * classes.size());
  int failures = 0, total = 0;
  std::vector<std::string> failure_lines;
  for (std::size_t c = 0; c < classes.size(); ++c) {
    int passed = 0;
    double worst_err = 0, worst_ratio = 0;
    for (int n = 0; n < count; ++n) {
      const std::uint64_t seed = master + c * 100003 + n;
      Rng rng(seed);
      const ProblemSpec spec = classes[c].make(rng, caps, n);
      progress.step(std::string(classes[c].name) + ": " + spec.describe());
      ++total;
      std::string outcome;
      bool ok = false;
      try {
        reference::AttentionTensors t = reference::make_tensors(spec, rng);
        const Measurement m = measure(device, spec, t, classes[c].decode, 0, 0, rng, 0);
        ok = m.check.ok;
        worst_err = std::max(worst_err, m.check.o.max_abs_err);
        if (m.check.o.bound > 0) worst_ratio = std::max(worst_ratio, m.check.o.max_abs_err / m.check.o.bound);
        outcome = m.check.summary();
      } catch (const std::exception& e) {
        outcome = std::string("exception: ") + e.what();
      }
      if (ok) {
        ++passed;
      } else {
        ++failures;
        failure_lines.push_back(std::string(classes[c].name) + ": " + spec.describe() + ": " + outcome);
      }
    }
    progress.done();
    std::printf("  %-28s %3d/%-3d passed   worst o error %.2e (%.0f%% of its bound)\n", classes[c].name, passed, count,
                worst_err, 100.0 * worst_ratio);
    std::fflush(stdout);
  }
  for (const auto& line : failure_lines) std::printf("  FAILED %s\n", line.c_str());
  if (failures) {
    std::printf("FAIL: %d of %d problems failed (replay: flashbuf verify --backend %s --count %d --seed %llu)\n",
                failures, total, device_label(device), count, static_cast<unsigned long long>(master));
    return 1;
  }
  std::printf("PASS: %d problems\n", total);
  return 0;
}

}  // namespace flashbuf::cli
