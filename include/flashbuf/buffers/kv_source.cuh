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
    const int page_in_seq = key / page_size;
    const int in_page = key - page_in_seq * page_size;
    // One unsigned min clamps both ways (a negative index wraps to a large one).
    const unsigned page = min(static_cast<unsigned>(__ldg(pages + page_in_seq)), static_cast<unsigned>(num_pages - 1));
    return base + page * page_stride + in_page * row_stride;
  }
};

}  // namespace flashbuf
