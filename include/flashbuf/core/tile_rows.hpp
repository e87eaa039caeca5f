// Core layer: which rows of a key tile each thread of a block copies, and where each of its
// 16-byte chunks lands in the swizzled tile (chunk c of row r at c ^ (r % 8), the layout the
// K/V buffers read, so the 8 rows of an ldmatrix phase hit 8 bank groups). A block of
// RowsPerPass x ChunksPerRow threads copies a tile of RowsPerPass * Passes rows in Passes
// passes; thread (row, chunk) copies chunk `chunk` of Passes rows:
//   strided      rows row + i * RowsPerPass: each pass covers whole groups of 8 rows, so a
//                pass's offset is the first's plus a constant (no XOR per pass);
//   consecutive  rows row * Passes + i: a thread's rows are one run of keys, which in a
//                paged cache lie in one page when Passes divides the page size (one page
//                entry and one address a tile instead of one a pass). Passes is a power of two,
//                so the run's XOR term is ((row * Passes) % 8) ^ (i % 8) (i fills the low bits
//                that row * Passes leaves 0): one XOR by a constant a pass.
#pragma once

#include "flashbuf/core/config.hpp"
#include "flashbuf/core/fast_divmod.hpp"

namespace flashbuf {

// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled tile of row_bytes rows.
FLASHBUF_HOST_DEVICE constexpr int swizzled_chunk_offset(int row, int chunk, int row_bytes) {
  return row * row_bytes + ((chunk ^ (row & 7)) << 4);
}

template <int RowBytes, int RowsPerPass, int Passes>
struct TileRows {
  static_assert((Passes & (Passes - 1)) == 0, "consecutive rows: Passes a power of two");
  static constexpr int kRows = RowsPerPass * Passes;

  FLASHBUF_HOST_DEVICE static constexpr int strided_row(int row, int i) { return i * RowsPerPass + row; }
  FLASHBUF_HOST_DEVICE static constexpr int consecutive_row(int row, int i) { return row * Passes + i; }

  // Consecutive rows: pass i's offset is consecutive_offset(consecutive_base(row), consecutive_chunk(row, chunk), i).
  FLASHBUF_HOST_DEVICE static constexpr int consecutive_base(int row) { return row * Passes * RowBytes; }
  FLASHBUF_HOST_DEVICE static constexpr int consecutive_chunk(int row, int chunk) {
    return (chunk ^ ((row * Passes) & 7)) << 4;
  }
  FLASHBUF_HOST_DEVICE static constexpr int consecutive_offset(int base, int chunk0, int i) {
    return base + i * RowBytes + (chunk0 ^ ((i & 7) << 4));
  }

  // A run of consecutive rows from key r0 (a multiple of Passes) in a paged sequence whose page
  // size is a multiple of Passes: the run's page in the sequence and its first row there. A run
  // at or past the keys' end `hi` (> 0) takes the last key's page and the start of that key's
  // run, so its copies (zero-fills) still address rows of one page the tile's entries hold.
  struct RunInPage {
    int page_in_seq;
    int in_page;
  };
  FLASHBUF_HOST_DEVICE static constexpr RunInPage run_in_page(int r0, int hi, const FastDivmod& page_div) {
    const int key = r0 < hi - 1 ? r0 : hi - 1;
    const int page_in_seq = page_div.div(key);
    return {page_in_seq, (key - page_in_seq * page_div.divisor) & -Passes};
  }
};

}  // namespace flashbuf
