// Core layer: Layout, a shape plus strides mapping a logical coordinate to a linear offset
// (in elements). The buffers layer describes every shared-memory and register tile with
// these; they are plain constexpr aggregates of 32-bit ints so device code pays nothing.
//
//   row_major(4, 8):  shape (4, 8), stride (8, 1)      col_major(4, 8): stride (1, 4)
//       offset(r, c) = 8 r + c                             offset(r, c) = r + 4 c
//
// Strides are assumed non-negative (all flashbuf layouts are). Swizzles are applied to the
// offset a Layout returns (see swizzle.hpp), not folded into the Layout.
#pragma once

#include "flashbuf/core/config.hpp"

namespace flashbuf {

template <int Rank>
struct Layout {
  static_assert(Rank >= 1, "a Layout has at least one mode");
  static constexpr int kRank = Rank;

  int shape[Rank];
  int stride[Rank];

  template <class... Coords>
  FLASHBUF_HOST_DEVICE constexpr int operator()(Coords... coords) const {
    static_assert(sizeof...(Coords) == Rank, "one coordinate per mode");
    const int c[Rank] = {static_cast<int>(coords)...};
    int offset = 0;
    for (int i = 0; i < Rank; ++i) offset += c[i] * stride[i];
    return offset;
  }

  // Number of coordinates (the domain).
  FLASHBUF_HOST_DEVICE constexpr int size() const {
    int n = 1;
    for (int i = 0; i < Rank; ++i) n *= shape[i];
    return n;
  }

  // One past the largest offset (the span of memory the layout touches); 0 when empty.
  FLASHBUF_HOST_DEVICE constexpr int cosize() const {
    if (size() == 0) return 0;
    int last = 0;
    for (int i = 0; i < Rank; ++i) last += (shape[i] - 1) * stride[i];
    return last + 1;
  }

  friend constexpr bool operator==(const Layout&, const Layout&) = default;
};

// Row-major (last mode contiguous): row_major(rows, cols), row_major(d0, d1, d2), ...
template <class... Extents>
FLASHBUF_HOST_DEVICE constexpr Layout<sizeof...(Extents)> row_major(Extents... extents) {
  constexpr int kRank = static_cast<int>(sizeof...(Extents));
  Layout<kRank> layout{{static_cast<int>(extents)...}, {}};
  int stride = 1;
  for (int i = kRank - 1; i >= 0; --i) {
    layout.stride[i] = stride;
    stride *= layout.shape[i];
  }
  return layout;
}

// Column-major (first mode contiguous): col_major(rows, cols), col_major(d0, d1, d2), ...
template <class... Extents>
FLASHBUF_HOST_DEVICE constexpr Layout<sizeof...(Extents)> col_major(Extents... extents) {
  constexpr int kRank = static_cast<int>(sizeof...(Extents));
  Layout<kRank> layout{{static_cast<int>(extents)...}, {}};
  int stride = 1;
  for (int i = 0; i < kRank; ++i) {
    layout.stride[i] = stride;
    stride *= layout.shape[i];
  }
  return layout;
}

// A 2-D tile made of blocks: `block` lays out the elements inside one block, `grid` places
// the blocks, each block occupying block.cosize() consecutive elements. Element (r, c) lies
// in block (r / block_rows, c / block_cols) at (r % block_rows, c % block_cols):
//
//   offset(r, c) = block(r % br, c % bc) + grid(r / br, c / bc) * block.cosize()
//
// Example: blocked_product(row_major(2, 2), col_major(2, 3)) is a 4x6 tile of 2x2 blocks
// stored block after block down the columns of blocks:
//
//          c: 0  1 | 2  3 | 4  5
//   r=0       0  1 | 8  9 |16 17
//   r=1       2  3 |10 11 |18 19
//            ------+------+------
//   r=2       4  5 |12 13 |20 21
//   r=3       6  7 |14 15 |22 23
//
// This is how a tile wider than one swizzle atom is stored (e.g. 128 bf16 columns as two
// 64-column, 128-byte-row atoms side by side).
struct BlockedLayout2 {
  Layout<2> block;
  Layout<2> grid;

  FLASHBUF_HOST_DEVICE constexpr int rows() const { return block.shape[0] * grid.shape[0]; }
  FLASHBUF_HOST_DEVICE constexpr int cols() const { return block.shape[1] * grid.shape[1]; }
  FLASHBUF_HOST_DEVICE constexpr int size() const { return block.size() * grid.size(); }
  FLASHBUF_HOST_DEVICE constexpr int cosize() const {
    return grid.size() == 0 ? 0 : grid.cosize() * block.cosize();
  }

  FLASHBUF_HOST_DEVICE constexpr int operator()(int r, int c) const {
    const int block_rows = block.shape[0];
    const int block_cols = block.shape[1];
    return block(r % block_rows, c % block_cols) +
           grid(r / block_rows, c / block_cols) * block.cosize();
  }
};

FLASHBUF_HOST_DEVICE constexpr BlockedLayout2 blocked_product(const Layout<2>& block,
                                                              const Layout<2>& grid) {
  return BlockedLayout2{block, grid};
}

// A rectangular window into a 2-D layout: same strides, smaller shape, and the offset of
// its first element. offset + layout(r, c) == parent(row0 + r, col0 + c).
struct TiledView {
  Layout<2> layout;
  int offset;

  FLASHBUF_HOST_DEVICE constexpr int operator()(int r, int c) const {
    return offset + layout(r, c);
  }
};

namespace detail {
// Extent of [begin, begin + extent) that lies inside [0, total).
FLASHBUF_HOST_DEVICE constexpr int clipped_extent(int begin, int extent, int total) {
  const int left = total - begin;
  return left <= 0 ? 0 : (left < extent ? left : extent);
}
}  // namespace detail

// Tile (tile_r, tile_c) of `layout` cut into tile_rows x tile_cols tiles. Edge tiles are
// clipped to the parent's extent (their shape is smaller, possibly 0), so a sequence length
// that is not a tile multiple needs no padding in the layout.
FLASHBUF_HOST_DEVICE constexpr TiledView tile(const Layout<2>& layout, int tile_rows,
                                              int tile_cols, int tile_r, int tile_c) {
  const int row0 = tile_r * tile_rows;
  const int col0 = tile_c * tile_cols;
  TiledView view{};
  view.layout.shape[0] = detail::clipped_extent(row0, tile_rows, layout.shape[0]);
  view.layout.shape[1] = detail::clipped_extent(col0, tile_cols, layout.shape[1]);
  view.layout.stride[0] = layout.stride[0];
  view.layout.stride[1] = layout.stride[1];
  view.offset = layout(row0, col0);
  return view;
}

}  // namespace flashbuf
