// Host tests of core/tile_rows.hpp: both assignments of a tile's rows to a block's threads copy
// every chunk of the tile once, and the consecutive form's per-pass offsets are the swizzled
// layout's, for the decode ring's shapes (D 64 / 128 / 256 and the 8-warp block).
#include <gtest/gtest.h>

#include <vector>

#include "flashbuf/core/tile_rows.hpp"

namespace {

using flashbuf::swizzled_chunk_offset;

template <int RowBytes, int RowsPerPass, int Passes>
void check_shape() {
  using Rows = flashbuf::TileRows<RowBytes, RowsPerPass, Passes>;
  constexpr int kChunks = RowBytes / 16;
  std::vector<int> strided(Rows::kRows * kChunks, 0), consecutive(Rows::kRows * kChunks, 0);
  for (int row = 0; row < RowsPerPass; ++row)
    for (int chunk = 0; chunk < kChunks; ++chunk) {
      const int base = Rows::consecutive_base(row), chunk0 = Rows::consecutive_chunk(row, chunk);
      for (int i = 0; i < Passes; ++i) {
        const int r = Rows::consecutive_row(row, i);
        ASSERT_EQ(Rows::consecutive_offset(base, chunk0, i), swizzled_chunk_offset(r, chunk, RowBytes))
            << "row " << row << " chunk " << chunk << " pass " << i;
        ++consecutive[r * kChunks + chunk];
        ++strided[Rows::strided_row(row, i) * kChunks + chunk];
      }
    }
  for (int n : strided) EXPECT_EQ(n, 1);
  for (int n : consecutive) EXPECT_EQ(n, 1);
  // The swizzled offsets of the tile are a permutation of its chunks.
  std::vector<int> seen(Rows::kRows * kChunks, 0);
  for (int r = 0; r < Rows::kRows; ++r)
    for (int c = 0; c < kChunks; ++c) ++seen[swizzled_chunk_offset(r, c, RowBytes) / 16];
  for (int n : seen) EXPECT_EQ(n, 1);
}

TEST(CoreTileRows, EveryChunkOnceAndTheSwizzledOffsets) {
  check_shape<256, 8, 8>();    // D 128, 4 warps: 8 rows a pass, 64-key tile
  check_shape<256, 16, 4>();   // D 128, 8 warps
  check_shape<128, 16, 4>();   // D 64
  check_shape<512, 4, 16>();   // D 256
  check_shape<256, 8, 2>();    // a run of 2: row * Passes leaves one low bit for i
  check_shape<128, 8, 1>();    // one pass: both forms are the row itself
}

TEST(CoreTileRows, ARunOfConsecutiveRowsIsOneRunOfKeys) {
  using Rows = flashbuf::TileRows<256, 8, 8>;
  for (int row = 0; row < 8; ++row)
    for (int i = 1; i < 8; ++i) EXPECT_EQ(Rows::consecutive_row(row, i), Rows::consecutive_row(row, 0) + i);
  EXPECT_EQ(Rows::strided_row(3, 2), 19) << "strided: rows 3, 11, 19, ...";
}

}  // namespace
