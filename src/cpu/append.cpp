// CPU backend: append_kv. Validation has checked every index entry (host tensors always are),
// so each token's row is copied where it belongs; the bounds test below only keeps the
// contract of the CUDA path, which writes no token whose position or page is outside.
#include <cstdint>
#include <cstring>

#include "api/backends.hpp"
#include "flashbuf/flashbuf.hpp"

namespace flashbuf::detail {
namespace {

// The address of element 0 of row (i0, i1, i2) of a rank-4 view.
template <class Pointer>
Pointer row_at(Pointer base, const std::int64_t (&stride)[3], std::int64_t i0, std::int64_t i1, std::int64_t i2,
               std::size_t elem) {
  return base + (i0 * stride[0] + i1 * stride[1] + i2 * stride[2]) * static_cast<std::int64_t>(elem);
}

}  // namespace

void cpu_append_kv(const AppendProblem& p) {
  const std::size_t elem = dtype_size(p.dtype);
  const std::int64_t capacity =
      p.page_table ? static_cast<std::int64_t>(p.max_pages) * p.rows_per_entry : p.rows_per_entry;
  auto* k_cache = static_cast<char*>(p.k_cache);
  auto* v_cache = static_cast<char*>(p.v_cache);
  const auto* k = static_cast<const char*>(p.k);
  const auto* v = static_cast<const char*>(p.v);
  for (int b = 0; b < p.batch; ++b) {
    for (int i = 0; i < p.seqlen_new; ++i) {
      const std::int64_t pos = static_cast<std::int64_t>(p.cache_seqlens[b]) + i;
      if (pos < 0 || pos >= capacity) continue;
      std::int64_t first = p.cache_batch_idx ? p.cache_batch_idx[b] : b, second = pos;
      if (p.page_table) {
        first = p.page_table[b * p.page_table_stride + pos / p.rows_per_entry];
        second = pos % p.rows_per_entry;
      }
      if (first < 0 || first >= p.cache_rows) continue;
      for (int h = 0; h < p.heads_kv; ++h) {
        std::memcpy(row_at(k_cache, p.kc_stride, first, second, h, elem), row_at(k, p.k_stride, b, i, h, elem),
                    p.head_dim * elem);
        std::memcpy(row_at(v_cache, p.vc_stride, first, second, h, elem), row_at(v, p.v_stride, b, i, h, elem),
                    p.head_dim_v * elem);
      }
    }
  }
}

}  // namespace flashbuf::detail
