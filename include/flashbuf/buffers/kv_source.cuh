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
    return paged_row(__ldg(pages + page_in_seq), key - page_in_seq * page_size);
  }
  // The pool page of a page-table entry: one unsigned min clamps both ways (a negative index
  // wraps to a large one).
  __device__ __forceinline__ unsigned pool_page(int entry) const {
    return min(static_cast<unsigned>(entry), static_cast<unsigned>(num_pages - 1));
  }
  __device__ __forceinline__ const T* paged_row(int entry, int in_page) const {
    return base + pool_page(entry) * page_stride + static_cast<unsigned>(in_page) * row_stride;
  }

  // Keys key, key + Step, key + 2 Step, ... of a paged source at column col: two divisions
  // per walk instead of one per key. get(valid): a key past the sequence may be past its
  // page-table row, so it reads no entry and gets a row of page 0. page(): the current key's
  // pool page (for a TMA box at row in_page).
  struct PagedRows {
    const KVSource& src;
    int col;
    int page_in_seq, in_page;
    int step_pages, step_rows;  // Step = step_pages * page_size + step_rows
    __device__ const T* get(bool valid) const {
      return src.paged_row(valid ? __ldg(src.pages + page_in_seq) : 0, in_page) + col;
    }
    __device__ int page() const { return static_cast<int>(src.pool_page(__ldg(src.pages + page_in_seq))); }
    __device__ void next(bool /*more*/) {
      page_in_seq += step_pages;
      in_page += step_rows;
      if (in_page >= src.page_size) {
        in_page -= src.page_size;
        ++page_in_seq;
      }
    }
  };
  template <int Step>
  __device__ PagedRows paged_rows(int key, int col) const {
    const int page_in_seq = key / page_size, step_pages = Step / page_size;
    return {*this, col, page_in_seq, key - page_in_seq * page_size, step_pages, Step - step_pages * page_size};
  }
  // The same walk in steps of `step` <= page_size rows that divide the page (TMA boxes): one
  // division, none per step.
  __device__ PagedRows paged_rows_within_pages(int key, int step) const {
    const int page_in_seq = key / page_size;
    return {*this, 0, page_in_seq, key - page_in_seq * page_size, 0, step};
  }
};

}  // namespace flashbuf
