// CPU backend: oneDNN matmul primitives behind TileGemm (see tile_gemm.hpp).
#include "cpu/tile_gemm.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "cpu/parallel.hpp"
#include "flashbuf/flashbuf.hpp"

namespace flashbuf::detail::cpu {
namespace {

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// One stream per thread: a oneDNN stream is not meant to be shared by concurrent callers.
dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

class OneDnnTileGemm final : public TileGemm {
 public:
  OneDnnTileGemm(int m, int n, int k, GemmInput input, BLayout b_layout, std::int64_t ldb) {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const dt in = input == GemmInput::bf16 ? dt::bf16 : dt::f32;
    // Every oneDNN call inside the try: a descriptor oneDNN refuses (strides whose rows
    // overlap, which a caller's view may have) must reach the caller as flashbuf's RuntimeError,
    // which the strided path's users answer by copying the tile instead.
    try {
      a_md_ = dnnl::memory::desc({m, k}, in, tag::ab);
      // B is logically K x N; `ba` stores it as N x K row-major (the K tile as it lies).
      if (ldb > 0) {
        const dnnl::memory::dims strides = b_layout == BLayout::n_by_k ? dnnl::memory::dims{1, ldb}
                                                                       : dnnl::memory::dims{ldb, 1};
        b_md_ = dnnl::memory::desc({k, n}, in, strides);
      } else {
        b_md_ = dnnl::memory::desc({k, n}, in, b_layout == BLayout::n_by_k ? tag::ba : tag::ab);
      }
      c_md_ = dnnl::memory::desc({m, n}, dt::f32, tag::ab);
      dnnl::primitive_attr attr;
      // The caller owns the scratchpad, so one primitive serves every worker thread at once.
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md_, b_md_, c_md_), attr, cpu_engine());
      scratch_md_ = pd.scratchpad_desc();
      primitive_ = dnnl::matmul(pd);
    } catch (const dnnl::error& e) {
      throw RuntimeError(std::string("CPU backend: oneDNN cannot run a ") +
                         (input == GemmInput::bf16 ? "bf16" : "fp32") + " matmul of " + std::to_string(m) + "x" +
                         std::to_string(n) + "x" + std::to_string(k) + " here: " + e.what());
    }
  }

  std::size_t scratchpad_bytes() const override { return scratch_md_.get_size(); }

  void run(const void* a, const void* b, float* c, void* scratchpad) const override {
    // Each thread keeps one set of memory objects per primitive and only repoints them: making
    // four memory objects and an argument map per product cost a few percent of small ones.
    struct Bound {
      dnnl::memory a, b, c, pad;
      std::unordered_map<int, dnnl::memory> args;
    };
    thread_local std::unordered_map<const OneDnnTileGemm*, Bound> bound_by_gemm;
    auto it = bound_by_gemm.find(this);
    if (it == bound_by_gemm.end()) {
      const dnnl::engine& engine = cpu_engine();
      Bound bound;
      bound.a = dnnl::memory(a_md_, engine, DNNL_MEMORY_NONE);
      bound.b = dnnl::memory(b_md_, engine, DNNL_MEMORY_NONE);
      bound.c = dnnl::memory(c_md_, engine, DNNL_MEMORY_NONE);
      bound.args = {{DNNL_ARG_SRC, bound.a}, {DNNL_ARG_WEIGHTS, bound.b}, {DNNL_ARG_DST, bound.c}};
      if (scratch_md_.get_size() > 0) {
        bound.pad = dnnl::memory(scratch_md_, engine, DNNL_MEMORY_NONE);
        bound.args.emplace(DNNL_ARG_SCRATCHPAD, bound.pad);
      }
      it = bound_by_gemm.emplace(this, std::move(bound)).first;
    }
    Bound& bound = it->second;
    bound.a.set_data_handle(const_cast<void*>(a));
    bound.b.set_data_handle(const_cast<void*>(b));
    bound.c.set_data_handle(c);
    if (bound.pad) bound.pad.set_data_handle(scratchpad);
    primitive_.execute(thread_stream(), bound.args);
    // CPU streams run in order on the calling thread; no wait is needed.
  }

 private:
  dnnl::memory::desc a_md_, b_md_, c_md_, scratch_md_;
  dnnl::matmul primitive_;
};

}  // namespace

const TileGemm& tile_gemm(int m, int n, int k, GemmInput input, BLayout b_layout, std::int64_t ldb) {
  using Key = std::tuple<int, int, int, int, int, std::int64_t>;
  static std::mutex mutex;
  static std::map<Key, std::unique_ptr<TileGemm>> cache;
  const Key key{m, n, k, static_cast<int>(input), static_cast<int>(b_layout), ldb};
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, std::make_unique<OneDnnTileGemm>(m, n, k, input, b_layout, ldb)).first;
  return *it->second;
}

bool bf16_gemm_supported() {
  // oneDNN emulates bf16 on plain AVX-512 slower than fp32 runs; take bf16 only where the CPU
  // has the instructions (the ISA oneDNN reports is at least avx512_core_bf16).
  static const bool supported = [] {
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    switch (isa) {
      case dnnl::cpu_isa::avx512_core_bf16:
      case dnnl::cpu_isa::avx512_core_amx:
        break;
      default:
        return false;
    }
    try {
      tile_gemm(16, 16, 16, GemmInput::bf16, BLayout::n_by_k);
      return true;
    } catch (const RuntimeError&) {
      return false;
    }
  }();
  return supported;
}

double tile_gemm_ceiling_flops(bool bf16, int threads, double seconds) {
  constexpr int kSize = 128;
  const GemmInput input = bf16 && bf16_gemm_supported() ? GemmInput::bf16 : GemmInput::f32;
  const TileGemm& gemm = tile_gemm(kSize, kSize, kSize, input, BLayout::n_by_k);
  const std::size_t elements = std::size_t(kSize) * kSize;
  const int team = resolve_thread_count(threads, 1 << 20);
  std::vector<long long> runs(team, 0);
  double elapsed = 0;
  for (int pass = 0; pass < 2; ++pass) {  // the first pass warms up clocks and caches
    const auto start = std::chrono::steady_clock::now();
    const double budget = pass == 0 ? seconds / 4 : seconds;
    parallel_for(team, team, [&] { return 0; }, [&](int&, std::int64_t worker) {
      // Operands of zeros-and-ones keep the numbers finite; the timing does not depend on them.
      std::vector<float> a(elements, 1.0f), b(elements, 0.5f), c(elements);
      std::vector<std::uint16_t> a16(elements, 0x3f80), b16(elements, 0x3f00);
      std::vector<unsigned char> pad(gemm.scratchpad_bytes() + 1);
      const void* pa = input == GemmInput::bf16 ? static_cast<const void*>(a16.data()) : a.data();
      const void* pb = input == GemmInput::bf16 ? static_cast<const void*>(b16.data()) : b.data();
      long long count = 0;
      while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < budget) {
        for (int i = 0; i < 16; ++i) gemm.run(pa, pb, c.data(), pad.data());
        count += 16;
      }
      runs[worker] = count;
    });
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  long long total = 0;
  for (long long r : runs) total += r;
  return 2.0 * kSize * kSize * kSize * double(total) / elapsed;
}

}  // namespace flashbuf::detail::cpu
