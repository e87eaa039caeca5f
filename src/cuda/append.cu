// The CUDA append_kv backend: one launch writes every new key and value row into the cache,
// reading cache_seqlens, cache_batch_idx and the page table on the device (no host
// synchronisation, capturable). A token whose position or page falls outside the cache (entries
// the host did not check) is skipped, never written elsewhere.
#include <cuda_runtime.h>

#include <cstdint>

#include "api/backends.hpp"
#include "cuda/check.cuh"
#include "flashbuf/core/kv_append.hpp"
#include "flashbuf/flashbuf.hpp"

namespace flashbuf::detail {
namespace {

constexpr int kThreads = 128;

// Each block takes (token, head) rows of k and v, a grid's stride apart: its threads copy the
// row's elements (of type Element: the dtype's bits, 2 or 4 bytes) to the cache row that the
// token's position selects.
template <class Element>
__global__ void __launch_bounds__(kThreads) append_kv_kernel(AppendProblem p, std::int64_t rows) {
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int h = static_cast<int>(row % p.heads_kv);
    const std::int64_t token = row / p.heads_kv;
    const int i = static_cast<int>(token % p.seqlen_new);
    const int b = static_cast<int>(token / p.seqlen_new);
    const auto [first, second] = kv_append::place_of(b, i, p.cache_seqlens, p.cache_batch_idx, p.page_table,
                                                     p.page_table_stride, p.max_pages, p.rows_per_entry, p.cache_rows);
    if (first < 0) continue;
    auto* kc = static_cast<Element*>(p.k_cache) + first * p.kc_stride[0] + second * p.kc_stride[1] + h * p.kc_stride[2];
    auto* vc = static_cast<Element*>(p.v_cache) + first * p.vc_stride[0] + second * p.vc_stride[1] + h * p.vc_stride[2];
    const auto* k = static_cast<const Element*>(p.k) + b * p.k_stride[0] + i * p.k_stride[1] + h * p.k_stride[2];
    const auto* v = static_cast<const Element*>(p.v) + b * p.v_stride[0] + i * p.v_stride[1] + h * p.v_stride[2];
    for (int e = threadIdx.x; e < p.head_dim; e += kThreads) kc[e] = k[e];
    for (int e = threadIdx.x; e < p.head_dim_v; e += kThreads) vc[e] = v[e];
  }
}

}  // namespace

void cuda_append_kv(const AppendProblem& p) {
  const std::int64_t rows = static_cast<std::int64_t>(p.batch) * p.seqlen_new * p.heads_kv;
  if (rows <= 0) return;
  int previous = 0;
  FLASHBUF_CUDA_CHECK(cudaGetDevice(&previous));
  if (previous != p.device_index) FLASHBUF_CUDA_CHECK(cudaSetDevice(p.device_index));
  const auto stream = static_cast<cudaStream_t>(p.stream);
  // A block a row up to 2^20 blocks (a decode step's few rows start at once); larger appends
  // (a prefill's) loop over the rest.
  const dim3 grid(static_cast<unsigned>(rows < (1 << 20) ? rows : (1 << 20)));
  if (dtype_size(p.dtype) == 2) {
    append_kv_kernel<std::uint16_t><<<grid, kThreads, 0, stream>>>(p, rows);
  } else {
    append_kv_kernel<std::uint32_t><<<grid, kThreads, 0, stream>>>(p, rows);
  }
  const cudaError_t err = cudaGetLastError();
  if (previous != p.device_index) cudaSetDevice(previous);
  FLASHBUF_CUDA_CHECK(err);
}

}  // namespace flashbuf::detail
