// buffers: the shared-memory tile layout of the Hopper (wgmma) path: 64-column slabs, each a
// dense stack of 8-row x 128-byte atoms with the 128-byte swizzle — the canonical layout that
// a wgmma descriptor with SmemSwizzle::b128 describes (and that TMA writes with a 64-column
// box). Slab-major, unlike SwizzledTile (whose rows span every slab), because wgmma steps
// through a slab with fixed strides: 128 bytes per row, 1024 bytes per 8 rows.
//
//   Rows x 128 tile (bf16) = 2 slabs:   slab 0: cols 0..63,  Rows x 128 bytes
//                                       slab 1: cols 64..127, Rows x 128 bytes
//   inside a slab, 16-byte chunk c of row r sits at chunk c ^ (r % 8) (core Swizzle<3,3,3>),
//   which is the hardware's 128-byte swizzle when each slab starts 1024-byte aligned.
#pragma once

#include "flashbuf/core/config.hpp"
#include "flashbuf/core/swizzle.hpp"

namespace flashbuf {

template <int Rows, int Cols>
struct SlabTile {
  using Atom = Swizzle128B<2>;
  static constexpr int kSlabCols = 64;                 // 128 bytes of 16-bit elements
  static constexpr int kRows = Rows;
  static constexpr int kCols = Cols;
  static constexpr int kSlabs = ceil_div(Cols, kSlabCols);
  static constexpr int kSlabElems = Rows * kSlabCols;
  static constexpr int kSlabBytes = kSlabElems * 2;
  static constexpr int kElems = kSlabs * kSlabElems;
  static constexpr int kBytes = kElems * 2;
  static constexpr int kRowBytes = kSlabCols * 2;      // 128
  static constexpr int kAtomBytes = 8 * kRowBytes;     // 1024: the descriptor's SBO
  static_assert(Rows % 8 == 0, "SlabTile: rows must be a multiple of 8 (one swizzle atom)");
  static_assert(Cols % 16 == 0, "SlabTile: columns must be a multiple of 16 (one MMA k-step)");

  FLASHBUF_HOST_DEVICE static constexpr int offset(int row, int col) {
    const int in_atom = (row % 8) * kSlabCols + col % kSlabCols;
    return col / kSlabCols * kSlabElems + row * kSlabCols + Atom::apply(in_atom) - (row % 8) * kSlabCols;
  }
};

}  // namespace flashbuf
