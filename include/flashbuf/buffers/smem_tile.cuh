// buffers: the shared-memory tile layout every K/V/Q buffer uses: a row-major tile of
// 16-bit elements built from 8-row x 64-column atoms (8 x 128 bytes), each atom permuted by
// Swizzle<3,3,3> so that 16-byte accesses to one chunk column of 8 consecutive rows (an
// ldmatrix 8x8 matrix, a cp.async row segment) hit 8 distinct bank groups.
//
//   64-column tile (128-byte rows), logical chunk c of row r lives at chunk c ^ (r % 8):
//
//        chunk:  0    1    2    3    4    5    6    7      (8 bf16 = 16 bytes each)
//     row 0  : [ 0 ][ 1 ][ 2 ][ 3 ][ 4 ][ 5 ][ 6 ][ 7 ]
//     row 1  : [ 1 ][ 0 ][ 3 ][ 2 ][ 5 ][ 4 ][ 7 ][ 6 ]    (physical chunk holding
//     row 2  : [ 2 ][ 3 ][ 0 ][ 1 ][ 6 ][ 7 ][ 4 ][ 5 ]     logical chunk c is c^(r%8))
//      ...
//   Wider tiles (D = 128, 192, 256) repeat the atom along the row: the row pitch is
//   round_up(cols, 64) elements and each 64-column slab is swizzled independently
//   (D = 96 is padded to a 128-element pitch so every slab is whole).
#pragma once

#include "flashbuf/core/config.hpp"
#include "flashbuf/core/swizzle.hpp"

namespace flashbuf {

template <int Rows, int Cols>
struct SwizzledTile {
  using Atom = Swizzle128B<2>;  // Swizzle<3,3,3> on 16-bit elements
  static constexpr int kAtomRows = 8;
  static constexpr int kAtomCols = 64;
  static constexpr int kChunkElems = 8;  // 16 bytes
  static constexpr int kRows = Rows;
  static constexpr int kCols = Cols;
  static constexpr int kPitch = round_up(Cols, kAtomCols);
  static constexpr int kElems = Rows * kPitch;
  static constexpr int kBytes = kElems * 2;
  static constexpr int kChunksPerRow = Cols / kChunkElems;
  static_assert(Rows % kAtomRows == 0, "SwizzledTile: rows must be a multiple of 8");
  static_assert(Cols % 16 == 0, "SwizzledTile: columns must be a multiple of 16 (one MMA k-step)");

  // Element offset of (row, col); col must be a multiple of 8 or index inside one chunk.
  FLASHBUF_HOST_DEVICE static constexpr int offset(int row, int col) {
    const int slab = col / kAtomCols * kAtomCols;
    const int in_atom = (row % kAtomRows) * kAtomCols + col % kAtomCols;
    return row * kPitch + slab + Atom::apply(in_atom) - (row % kAtomRows) * kAtomCols;
  }
};

// Copies of a SwizzledTile by 128-byte lines: 8 threads a row, thread t taking chunk t % 8 of
// every line (64 columns) of rows t / 8 + pass * kRowsPerPass. A thread's chunks of one row are
// whole atoms apart and its passes whole 8-row atoms apart, so every chunk keeps the swizzle of
// its first: its shared offset is the first's plus offset_step(pass, line), a constant, and in
// device memory the chunks of a row share one row address (lines at immediate offsets).
template <class Tile, int NumThreads>
struct LineCopies {
  static constexpr int kThreadsPerRow = Tile::kAtomCols / Tile::kChunkElems;
  static constexpr int kRowsPerPass = NumThreads / kThreadsPerRow;
  static constexpr int kLines = Tile::kChunksPerRow / kThreadsPerRow;
  static constexpr int kPasses = kRowsPerPass > 0 ? Tile::kRows / kRowsPerPass : 0;
  static constexpr bool kApplies = Tile::kChunksPerRow % kThreadsPerRow == 0 && NumThreads % kThreadsPerRow == 0 &&
                                   kRowsPerPass > 0 && kRowsPerPass % Tile::kAtomRows == 0 &&
                                   Tile::kRows % kRowsPerPass == 0;

  FLASHBUF_HOST_DEVICE static constexpr int first_row(int thread) { return thread / kThreadsPerRow; }
  FLASHBUF_HOST_DEVICE static constexpr int first_col(int thread) { return thread % kThreadsPerRow * Tile::kChunkElems; }
  // Element offsets of chunk (pass, line) from the thread's first, in the tile and in a row.
  FLASHBUF_HOST_DEVICE static constexpr int offset_step(int pass, int line) {
    return pass * kRowsPerPass * Tile::kPitch + line * Tile::kAtomCols;
  }
  FLASHBUF_HOST_DEVICE static constexpr int col_step(int line) { return line * Tile::kAtomCols; }
};

}  // namespace flashbuf
