// CPU backend: append_kv. Validation has checked every index entry (host tensors always are),
// so every token has a place (core/kv_append.hpp) and its rows are copied there.
#include <cstdint>
#include <cstring>

#include "api/backends.hpp"
#include "flashbuf/core/kv_append.hpp"
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
  auto* k_cache = static_cast<char*>(p.k_cache);
  auto* v_cache = static_cast<char*>(p.v_cache);
  const auto* k = static_cast<const char*>(p.k);
  const auto* v = static_cast<const char*>(p.v);
  for (int b = 0; b < p.batch; ++b) {
    for (int i = 0; i < p.seqlen_new; ++i) {
      const auto [first, second] =
          kv_append::place_of(b, i, p.cache_seqlens, p.cache_batch_idx, p.page_table, p.page_table_stride,
                              p.max_pages, p.rows_per_entry, p.cache_rows);
      if (first < 0) continue;
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
