// Host tests of core/layout.hpp and core/print_layout.hpp: offsets of row/col-major
// layouts, blocked products and tiles, and the ASCII drawings.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "flashbuf/core/layout.hpp"
#include "flashbuf/core/print_layout.hpp"
#include "flashbuf/core/swizzle.hpp"

namespace flashbuf {
namespace {

static_assert(row_major(4, 8)(1, 2) == 10);
static_assert(col_major(4, 8)(1, 2) == 9);
static_assert(row_major(2, 3, 4).stride[0] == 12 && row_major(2, 3, 4).stride[1] == 4);
static_assert(row_major(4, 8).cosize() == 32);

// Every coordinate of a compact layout maps to a distinct offset in [0, size).
template <int Rank>
void expect_compact_bijection(const Layout<Rank>& layout) {
  std::vector<int> hits(layout.size(), 0);
  int coord[Rank] = {};
  for (int n = 0; n < layout.size(); ++n) {
    int rem = n;
    for (int i = Rank - 1; i >= 0; --i) {
      coord[i] = rem % layout.shape[i];
      rem /= layout.shape[i];
    }
    int offset = 0;
    if constexpr (Rank == 2) offset = layout(coord[0], coord[1]);
    if constexpr (Rank == 3) offset = layout(coord[0], coord[1], coord[2]);
    if constexpr (Rank == 4) offset = layout(coord[0], coord[1], coord[2], coord[3]);
    ASSERT_GE(offset, 0);
    ASSERT_LT(offset, layout.size());
    ++hits[offset];
  }
  for (int h : hits) EXPECT_EQ(h, 1);
  EXPECT_EQ(layout.cosize(), layout.size());
}

TEST(CoreLayout, RowAndColumnMajor) {
  const auto rm = row_major(3, 5);
  EXPECT_EQ(rm.shape[0], 3);
  EXPECT_EQ(rm.shape[1], 5);
  EXPECT_EQ(rm.stride[0], 5);
  EXPECT_EQ(rm.stride[1], 1);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 5; ++c) {
      EXPECT_EQ(rm(r, c), r * 5 + c);
      EXPECT_EQ(col_major(3, 5)(r, c), r + 3 * c);
    }
  const auto r4 = row_major(2, 3, 4, 5);
  EXPECT_EQ(r4(1, 2, 3, 4), 1 * 60 + 2 * 20 + 3 * 5 + 4);
  const auto c3 = col_major(2, 3, 4);
  EXPECT_EQ(c3(1, 2, 3), 1 + 2 * 2 + 3 * 6);
  expect_compact_bijection(rm);
  expect_compact_bijection(col_major(7, 3));
  expect_compact_bijection(row_major(2, 3, 4));
  expect_compact_bijection(col_major(2, 3, 4, 5));
}

TEST(CoreLayout, SizeAndCosize) {
  const Layout<2> padded{{4, 8}, {10, 1}};  // row pitch 10 > 8 columns
  EXPECT_EQ(padded.size(), 32);
  EXPECT_EQ(padded.cosize(), 3 * 10 + 7 + 1);
  const Layout<2> empty{{0, 8}, {8, 1}};
  EXPECT_EQ(empty.size(), 0);
  EXPECT_EQ(empty.cosize(), 0);
  const Layout<2> broadcast{{4, 8}, {0, 1}};  // every row aliases row 0
  EXPECT_EQ(broadcast.cosize(), 8);
}

TEST(CoreLayout, BlockedProductPlacesBlocksByTheGrid) {
  // The example drawn in layout.hpp.
  const auto blocked = blocked_product(row_major(2, 2), col_major(2, 3));
  EXPECT_EQ(blocked.rows(), 4);
  EXPECT_EQ(blocked.cols(), 6);
  const int expected[4][6] = {{0, 1, 8, 9, 16, 17},
                              {2, 3, 10, 11, 18, 19},
                              {4, 5, 12, 13, 20, 21},
                              {6, 7, 14, 15, 22, 23}};
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 6; ++c) EXPECT_EQ(blocked(r, c), expected[r][c]) << r << "," << c;

  // A 64 x 128 bf16 tile as two 64x64 atoms side by side: bijective onto [0, 8192), and
  // each atom is contiguous.
  const auto wide = blocked_product(row_major(64, 64), row_major(1, 2));
  EXPECT_EQ(wide.size(), 64 * 128);
  EXPECT_EQ(wide.cosize(), 64 * 128);
  std::vector<int> hits(wide.cosize(), 0);
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < 128; ++c) {
      const int offset = wide(r, c);
      ASSERT_GE(offset, 0);
      ASSERT_LT(offset, wide.cosize());
      ++hits[offset];
      EXPECT_EQ(offset / (64 * 64), c / 64);
    }
  for (int h : hits) EXPECT_EQ(h, 1);
}

TEST(CoreLayout, TileIsAWindowOfTheParent) {
  const Layout<2> parent{{37, 50}, {64, 1}};  // odd sizes, padded pitch
  constexpr int kTileRows = 16, kTileCols = 32;
  int covered = 0;
  for (int tr = 0; tr < 3; ++tr)
    for (int tc = 0; tc < 2; ++tc) {
      const TiledView view = tile(parent, kTileRows, kTileCols, tr, tc);
      const int expect_rows = tr < 2 ? kTileRows : 37 - 2 * kTileRows;  // last one clipped
      const int expect_cols = tc < 1 ? kTileCols : 50 - kTileCols;
      EXPECT_EQ(view.layout.shape[0], expect_rows);
      EXPECT_EQ(view.layout.shape[1], expect_cols);
      for (int r = 0; r < view.layout.shape[0]; ++r)
        for (int c = 0; c < view.layout.shape[1]; ++c)
          EXPECT_EQ(view(r, c), parent(tr * kTileRows + r, tc * kTileCols + c));
      covered += view.layout.size();
    }
  EXPECT_EQ(covered, parent.size());
  // A tile entirely past the edge is empty.
  EXPECT_EQ(tile(parent, kTileRows, kTileCols, 3, 0).layout.size(), 0);
}

TEST(CoreLayout, AsciiDrawing) {
  const std::string expected =
      "    0   1   2 \n"
      "  +---+---+---+\n"
      "0 | 0 | 1 | 2 |\n"
      "  +---+---+---+\n"
      "1 | 3 | 4 | 5 |\n"
      "  +---+---+---+\n";
  EXPECT_EQ(to_ascii(row_major(2, 3)), expected);

  // The swizzled drawing shows swizzled offsets: row 1 of a 64-column bf16 tile under
  // Swizzle<3,3,3> starts with chunk 1 (offset 64 + 8 = 72).
  const std::string swizzled = to_ascii(row_major(2, 64), Swizzle<3, 3, 3>{});
  EXPECT_NE(swizzled.find("1 |  72 |  73 |"), std::string::npos) << swizzled;
  EXPECT_NE(to_ascii(blocked_product(row_major(2, 2), col_major(2, 3))).find("| 16 | 17 |"),
            std::string::npos);

  // Banks: 2-byte elements, 2 per bank; row 1 swizzled starts at chunk 1 = bank 4.
  const std::string banks = to_ascii_banks(row_major(2, 64), 2, Swizzle<3, 3, 3>{});
  EXPECT_NE(banks.find("1 |  4 |  4 |  5 |"), std::string::npos) << banks;
  const std::string plain_banks = to_ascii_banks(row_major(2, 64), 2);
  EXPECT_NE(plain_banks.find("1 |  0 |  0 |  1 |"), std::string::npos) << plain_banks;
}

}  // namespace
}  // namespace flashbuf
