// GPU tests: append_kv on CUDA tensors, bit for bit against the same writes made on the host a
// row at a time, for contiguous, indexed and paged caches with strided views; device index
// entries that would write outside the cache (unchecked) drop those tokens and write nothing
// else; checked (check_index_contents) they are refused by name; a captured graph replays with
// new lengths.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "flashbuf/flashbuf.hpp"
#include "gpu_test_util.cuh"

namespace {

using flashbuf::AppendKvArgs;
using flashbuf::DeviceKind;
using flashbuf::DType;
using flashbuf::TensorView;

// Rank-4 shapes with rows `pad` elements apart beyond the last dimension (a sliced view).
struct Layout {
  std::int64_t shape[4];
  std::int64_t pad = 0;
  std::int64_t stride(int i) const {
    std::int64_t s = 1;
    for (int j = 3; j > i; --j) s *= j == 3 ? shape[3] + pad : shape[j];
    return s;
  }
  std::int64_t size() const { return shape[0] * stride(0); }
  std::int64_t at(std::int64_t a, std::int64_t b, std::int64_t c) const {
    return a * stride(0) + b * stride(1) + c * stride(2);
  }
  TensorView view(void* data, DType dtype) const {
    TensorView v = flashbuf::make_view(data, dtype, {shape[0], shape[1], shape[2], shape[3]}, DeviceKind::cuda);
    for (int i = 0; i < 3; ++i) v.stride[i] = stride(i);
    return v;
  }
};

template <class Bits>
std::vector<Bits> random_bits(std::int64_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Bits> out(static_cast<std::size_t>(n));
  for (Bits& x : out) x = static_cast<Bits>(rng());
  return out;
}

struct Problem {
  Layout k_cache, v_cache, k, v;
  std::vector<std::int32_t> lens, idx, table;  // idx / table empty when absent
  std::int64_t table_stride = 0, max_pages = 0;
};

// The caches after the append, written here: tokens whose position or page lies outside the
// cache are skipped.
template <class Bits>
void expected_append(const Problem& p, std::vector<Bits>& kc, std::vector<Bits>& vc, const std::vector<Bits>& k,
                     const std::vector<Bits>& v) {
  const std::int64_t rows = p.k_cache.shape[0], entries = p.k_cache.shape[1];
  const bool paged = !p.table.empty();
  const std::int64_t capacity = paged ? p.max_pages * entries : entries;
  for (std::int64_t b = 0; b < p.k.shape[0]; ++b) {
    for (std::int64_t i = 0; i < p.k.shape[1]; ++i) {
      const std::int64_t pos = static_cast<std::int64_t>(p.lens[b]) + i;
      if (pos < 0 || pos >= capacity) continue;
      std::int64_t first = p.idx.empty() ? b : p.idx[b], second = pos;
      if (paged) first = p.table[b * p.table_stride + pos / entries], second = pos % entries;
      if (first < 0 || first >= rows) continue;
      for (std::int64_t h = 0; h < p.k.shape[2]; ++h) {
        for (std::int64_t e = 0; e < p.k.shape[3]; ++e) kc[p.k_cache.at(first, second, h) + e] = k[p.k.at(b, i, h) + e];
        for (std::int64_t e = 0; e < p.v.shape[3]; ++e) vc[p.v_cache.at(first, second, h) + e] = v[p.v.at(b, i, h) + e];
      }
    }
  }
}

template <class Bits>
void run_case(const Problem& p, DType dtype, bool checked, const std::string& refused_arg) {
  SCOPED_TRACE(std::string(flashbuf::dtype_name(dtype)) + (checked ? " checked" : " unchecked"));
  auto kc_host = random_bits<Bits>(p.k_cache.size(), 1), vc_host = random_bits<Bits>(p.v_cache.size(), 2);
  auto k_host = random_bits<Bits>(p.k.size(), 3), v_host = random_bits<Bits>(p.v.size(), 4);
  DeviceBuffer<Bits> kc(kc_host), vc(vc_host), k(k_host), v(v_host);
  DeviceBuffer<std::int32_t> lens(p.lens);
  std::vector<std::int32_t> none{0};
  DeviceBuffer<std::int32_t> idx(p.idx.empty() ? none : p.idx), table(p.table.empty() ? none : p.table);
  AppendKvArgs a;
  a.k_cache = p.k_cache.view(kc.ptr, dtype), a.v_cache = p.v_cache.view(vc.ptr, dtype);
  a.k = p.k.view(k.ptr, dtype), a.v = p.v.view(v.ptr, dtype);
  const std::int64_t batch = p.k.shape[0];
  a.cache_seqlens = flashbuf::make_view(lens.ptr, DType::int32, {batch}, DeviceKind::cuda);
  if (!p.idx.empty()) a.cache_batch_idx = flashbuf::make_view(idx.ptr, DType::int32, {batch}, DeviceKind::cuda);
  if (!p.table.empty()) {
    a.page_table = flashbuf::make_view(table.ptr, DType::int32, {batch, p.max_pages}, DeviceKind::cuda);
    a.page_table.stride[0] = p.table_stride;
  }
  a.check_index_contents = checked;
  if (checked && !refused_arg.empty()) {
    try {
      flashbuf::append_kv(a);
      ADD_FAILURE() << "no error; expected one for " << refused_arg;
    } catch (const flashbuf::ArgumentError& e) {
      EXPECT_EQ(e.argument(), refused_arg) << e.what();
    }
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT_EQ(kc.download(), kc_host) << "k_cache was written";
    EXPECT_EQ(vc.download(), vc_host) << "v_cache was written";
    return;
  }
  EXPECT_EQ(flashbuf::append_kv(a), flashbuf::Backend::sm80);
  CUDA_OK(cudaDeviceSynchronize());
  expected_append(p, kc_host, vc_host, k_host, v_host);
  EXPECT_EQ(kc.download(), kc_host);
  EXPECT_EQ(vc.download(), vc_host);
}

template <class Bits>
void run_both(const Problem& p, DType dtype, const std::string& refused_arg) {
  run_case<Bits>(p, dtype, /*checked=*/false, refused_arg);
  run_case<Bits>(p, dtype, /*checked=*/true, refused_arg);
}

Problem contiguous(std::vector<std::int32_t> lens, std::vector<std::int32_t> idx = {}) {
  Problem p;
  p.k_cache = {{3, 40, 2, 128}, 8};
  p.v_cache = {{3, 40, 2, 64}, 0};
  p.k = {{3, 5, 2, 128}, 0};
  p.v = {{3, 5, 2, 64}, 16};
  p.lens = std::move(lens), p.idx = std::move(idx);
  return p;
}

TEST(AppendKvGpu, ContiguousAndIndexed) {
  FLASHBUF_REQUIRE_GPU();
  run_both<std::uint16_t>(contiguous({0, 17, 35}), DType::bf16, "");
  run_both<std::uint32_t>(contiguous({0, 17, 35}), DType::fp32, "");
  run_both<std::uint16_t>(contiguous({3, 0, 30}, {2, 0, 1}), DType::fp16, "");
  // Entries outside: past the end (38 + 5 > 40), negative, a row outside the cache.
  run_both<std::uint16_t>(contiguous({38, -2, 4}), DType::bf16, "cache_seqlens[0]");
  run_both<std::uint16_t>(contiguous({1, 2, 3}, {0, 3, 1}), DType::bf16, "cache_batch_idx[1]");
}

TEST(AppendKvGpu, PagedAcrossPages) {
  FLASHBUF_REQUIRE_GPU();
  Problem p;
  p.k_cache = {{9, 16, 2, 128}, 0};
  p.v_cache = {{9, 16, 2, 128}, 8};
  p.k = {{2, 20, 2, 128}, 0};
  p.v = {{2, 20, 2, 128}, 0};
  p.max_pages = 3, p.table_stride = 4;  // a sliced table
  p.table = {4, 0, 7, -1, 8, 2, 5, -1};
  p.lens = {10, 27};  // 10..29: pages 0-1; 27..46: pages 1-2
  run_both<std::uint16_t>(p, DType::bf16, "");
  p.table[4 + 2] = 9;  // outside the pool of 9, where sequence 1 writes
  run_both<std::uint16_t>(p, DType::bf16, "page_table[1][2]");
}

TEST(AppendKvGpu, CapturedGraphReplaysWithNewLengths) {
  FLASHBUF_REQUIRE_GPU();
  Problem p = contiguous({0, 1, 2});
  auto kc_host = random_bits<std::uint16_t>(p.k_cache.size(), 5), vc_host = random_bits<std::uint16_t>(p.v_cache.size(), 6);
  auto k_host = random_bits<std::uint16_t>(p.k.size(), 7), v_host = random_bits<std::uint16_t>(p.v.size(), 8);
  DeviceBuffer<std::uint16_t> kc(kc_host), vc(vc_host), k(k_host), v(v_host);
  DeviceBuffer<std::int32_t> lens(p.lens);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  AppendKvArgs a;
  a.k_cache = p.k_cache.view(kc.ptr, DType::bf16), a.v_cache = p.v_cache.view(vc.ptr, DType::bf16);
  a.k = p.k.view(k.ptr, DType::bf16), a.v = p.v.view(v.ptr, DType::bf16);
  a.cache_seqlens = flashbuf::make_view(lens.ptr, DType::int32, {3}, DeviceKind::cuda);
  a.stream = stream;
  a.check_index_contents = true;  // skipped while capturing: no copy, no synchronisation
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  flashbuf::append_kv(a);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (const std::vector<std::int32_t>& step : {std::vector<std::int32_t>{5, 0, 39}, {12, 30, 7}}) {
    p.lens = step;
    lens.upload(step);
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    expected_append(p, kc_host, vc_host, k_host, v_host);
    EXPECT_EQ(kc.download(), kc_host);
    EXPECT_EQ(vc.download(), vc_host);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
