// buffers: where a K or V tile comes from in device memory. One row address per key, so a
// contiguous cache, a varlen batch and a paged cache (any page size 1..256, pages anywhere
// in the pool) all look the same to the buffers. The one page addressing of prefill and
// decode: a key's page by the page size's multiply-and-shift division (core/fast_divmod.hpp),
// its pool page clamped into the pool.
#pragma once

#include <cstdint>

#include "flashbuf/arch/sm80/mad_wide.cuh"
#include "flashbuf/core/fast_divmod.hpp"

namespace flashbuf {

template <class T>
struct KVSource {
  const T* base = nullptr;          // sequence start (contiguous) or the page pool (paged)
  std::int64_t row_stride = 0;      // elements between consecutive keys
  const std::int32_t* pages = nullptr;  // this sequence's page-table row; null if contiguous
  std::int64_t page_stride = 0;     // elements between pages
  FastDivmod page_div;              // by the page size (its divisor)
  int num_pages = 0;                // pool size: indices are clamped so a bad table can't fault

  __device__ __forceinline__ int page_size() const { return page_div.divisor; }
  __device__ __forceinline__ const T* contiguous_row(int key) const { return base + key * row_stride; }
  __device__ __forceinline__ const T* row(int key) const {
    if (pages == nullptr) return contiguous_row(key);
    const int page_in_seq = page_div.div(key);
    return paged_row(__ldg(pages + page_in_seq), key - page_in_seq * page_size());
  }
  // The pool page of a page-table entry: one unsigned min clamps both ways (a negative index
  // wraps to a large one).
  __device__ __forceinline__ unsigned pool_page(int entry) const {
    return min(static_cast<unsigned>(entry), static_cast<unsigned>(num_pages - 1));
  }
  __device__ __forceinline__ const T* paged_row(int entry, int in_page) const {
    return base + pool_page(entry) * page_stride + static_cast<unsigned>(in_page) * row_stride;
  }
  // The same address in bytes, from `chunk` (a column's address at pool page 0, row 0), with two
  // 32 x 32 -> 64-bit multiply-adds where 64-bit strides take ~20 instructions a row: for a
  // kernel whose integer work per row counts (decode), with byte strides under 4 GiB.
  __device__ __forceinline__ static const void* paged_chunk(const void* chunk, unsigned page, unsigned in_page,
                                                             std::uint32_t page_bytes, std::uint32_t row_bytes) {
    const std::uint64_t at = sm80::mad_wide_u32(page, page_bytes, reinterpret_cast<std::uint64_t>(chunk));
    return reinterpret_cast<const void*>(sm80::mad_wide_u32(in_page, row_bytes, at));
  }

  // Keys key, key + Step, key + 2 Step, ... of a paged source at column col: two divisions
  // per walk instead of one per key. get(valid): a key past the sequence may be past its
  // page-table row, so it reads no entry and gets a row of page 0. page(): the current key's
  // pool page (for a TMA box at row in_page).
  struct PagedRows {
    const KVSource& src;
    int col;
    int page_in_seq, in_page;
    int step_pages, step_rows;  // Step = step_pages * page_size() + step_rows
    __device__ const T* get(bool valid) const {
      return src.paged_row(valid ? __ldg(src.pages + page_in_seq) : 0, in_page) + col;
    }
    __device__ int page() const { return static_cast<int>(src.pool_page(__ldg(src.pages + page_in_seq))); }
    __device__ void next(bool /*more*/) {
      page_in_seq += step_pages;
      in_page += step_rows;
      if (in_page >= src.page_size()) {
        in_page -= src.page_size();
        ++page_in_seq;
      }
    }
  };
  template <int Step>
  __device__ PagedRows paged_rows(int key, int col) const {
    const int page_in_seq = page_div.div(key), step_pages = page_div.div(Step);
    return {*this, col, page_in_seq, key - page_in_seq * page_size(), step_pages, Step - step_pages * page_size()};
  }
  // The same walk in steps of `step` <= page_size() rows that divide the page (TMA boxes): one
  // division, none per step.
  __device__ PagedRows paged_rows_within_pages(int key, int step) const {
    const int page_in_seq = page_div.div(key);
    return {*this, 0, page_in_seq, key - page_in_seq * page_size(), 0, step};
  }
};

}  // namespace flashbuf
