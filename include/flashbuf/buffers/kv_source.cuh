// buffers: where a K or V tile comes from in device memory. One row address per key, so a
// contiguous cache, a varlen batch and a paged cache (any page size 1..256, pages anywhere
// in the pool) all look the same to the buffers.
#pragma once

#include <cstdint>

namespace flashbuf {

template <class T>
struct KVSource {
  const T* base = nullptr;          // sequence start (contiguous) or the page pool (paged)
  std::int64_t row_stride = 0;      // elements between consecutive keys
  const std::int32_t* pages = nullptr;  // this sequence's page-table row; null if contiguous
  std::int64_t page_stride = 0;     // elements between pages
  int page_size = 0;
  int num_pages = 0;                // pool size: indices are clamped so a bad table can't fault

  __device__ __forceinline__ const T* row(int key) const {
    if (pages == nullptr) return base + key * row_stride;
    int page = __ldg(pages + key / page_size);
    page = page < 0 ? 0 : (page >= num_pages ? num_pages - 1 : page);
    return base + page * page_stride + (key % page_size) * row_stride;
  }
};

}  // namespace flashbuf
