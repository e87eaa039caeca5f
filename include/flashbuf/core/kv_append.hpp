// Core layer: where append_kv writes a new token, shared by its CPU and CUDA backends. Token i
// of sequence b goes to position pos = cache_seqlens[b] + i of its cache: row pos of cache
// row cache_batch_idx[b] (b without it) of a contiguous cache, or row pos % page of page
// page_table[b][pos / page] of a paged one. Entries the host did not check may point outside
// the cache; such a token has no place and is not written.
#pragma once

#include <cstdint>

#include "flashbuf/core/config.hpp"

namespace flashbuf::kv_append {

struct Place {
  std::int64_t first = -1;  // cache row (contiguous) or page (paged); -1: outside the cache
  std::int64_t second = 0;  // position in the row, or row in the page
};

// rows_per_entry: the caches' second dimension (S, or the page size); cache_rows: their first
// (Bc, or the pool's pages); max_pages 0 for a contiguous cache. batch_idx and page_table may
// be null (absent).
FLASHBUF_HOST_DEVICE inline Place place_of(int b, int i, const std::int32_t* cache_seqlens,
                                           const std::int32_t* batch_idx, const std::int32_t* page_table,
                                           std::int64_t page_table_stride, int max_pages, int rows_per_entry,
                                           int cache_rows) {
  const std::int64_t capacity =
      page_table ? static_cast<std::int64_t>(max_pages) * rows_per_entry : rows_per_entry;
  const std::int64_t pos = static_cast<std::int64_t>(cache_seqlens[b]) + i;
  Place place;
  if (pos < 0 || pos >= capacity) return place;
  std::int64_t first = batch_idx ? batch_idx[b] : b, second = pos;
  if (page_table) {
    first = page_table[b * page_table_stride + pos / rows_per_entry];
    second = pos % rows_per_entry;
  }
  if (first < 0 || first >= cache_rows) return place;
  place.first = first, place.second = second;
  return place;
}

}  // namespace flashbuf::kv_append
