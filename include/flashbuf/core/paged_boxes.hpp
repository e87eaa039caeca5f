// Core layer: how the Hopper producer reads a page pool through the bulk tensor copy engine
// (TMA). A tensor map over the pool (cols, page rows, heads, pages) is copied in boxes of
// `rows` rows x 64 columns (one 128-byte-swizzled slab), each box inside ONE page (a box's
// page comes from the page table) and inside one key tile:
//
//   page 16, key tile 128:  | p0 | p1 | p2 | p3 | p4 | p5 | p6 | p7 |   8 boxes of 16 rows
//   page 40, key tile 64:   tile 0 = rows 0..63 = p0[0..40) p1[0..24): boxes of gcd = 8 rows
//   page 256, key tile 128: one box per tile, two tiles per page
//
// so the box is gcd(page, tile) rows. It must start on a swizzle atom (a multiple of 8 rows)
// and hold at least 2 KB over all of a row's columns: 2 KB boxes (D 64 at page 16) beat the
// cp.async gather once K and V have their own issuing threads; 1 KB boxes are not tried
// (bench/NOTES-prefill.md, "Measurements behind the code's choices").
#pragma once

#include "flashbuf/core/config.hpp"

namespace flashbuf::paged_tma {

inline constexpr int kAtomRows = 8;            // 128-byte swizzle atom: 8 rows of 128 bytes
inline constexpr int kMinBoxBytes = 2 * 1024;  // smallest box measured faster than the gather

// Rows per box for pages of `page_size` rows and key tiles of `block_n` rows whose rows hold
// `row_bytes` bytes (the narrower of K and V); 0 where the gather should take the pages.
FLASHBUF_HOST_DEVICE constexpr int box_rows(int page_size, int block_n, int row_bytes) {
  if (page_size < 1 || block_n < 1) return 0;
  int rows = page_size, rest = block_n;  // gcd (Euclid; std::gcd is host-only for nvcc)
  while (rest != 0) {
    const int r = rows % rest;
    rows = rest;
    rest = r;
  }
  return rows % kAtomRows == 0 && rows * row_bytes >= kMinBoxBytes ? rows : 0;
}

}  // namespace flashbuf::paged_tma
