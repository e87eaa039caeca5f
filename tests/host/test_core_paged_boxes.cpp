// Host tests of core/paged_boxes.hpp: which page sizes the Hopper producer reads through TMA,
// and in boxes of how many rows.
#include <gtest/gtest.h>

#include "flashbuf/core/paged_boxes.hpp"

namespace {

using flashbuf::paged_tma::box_rows;

TEST(CorePagedBoxes, WholePagesWhenThePageDividesTheTile) {
  EXPECT_EQ(box_rows(16, 128, 256), 16) << "D 128, page 16: 8 boxes a tile";
  EXPECT_EQ(box_rows(32, 128, 128), 32) << "D 64, page 32: 4 KB boxes";
  EXPECT_EQ(box_rows(16, 64, 512), 16) << "D 256 (key tile 64), page 16";
  EXPECT_EQ(box_rows(16, 128, 128), 16) << "D 64, page 16: 2 KB boxes (measured 1.23-1.36x the gather)";
  EXPECT_EQ(box_rows(8, 128, 256), 8) << "D 128, page 8: 2 KB boxes";
}

TEST(CorePagedBoxes, OneBoxATileWhenTheTileDividesThePage) {
  EXPECT_EQ(box_rows(128, 128, 256), 128);
  EXPECT_EQ(box_rows(256, 128, 128), 128);
  EXPECT_EQ(box_rows(256, 64, 512), 64);
}

TEST(CorePagedBoxes, TheCommonDivisorWhenNeitherDividesTheOther) {
  // Tiles cross page ends: boxes of gcd rows stay inside one page and one tile.
  EXPECT_EQ(box_rows(40, 64, 512), 8);
  EXPECT_EQ(box_rows(24, 64, 512), 8);
  EXPECT_EQ(box_rows(48, 128, 256), 16);
  EXPECT_EQ(box_rows(96, 64, 512), 32);
}

TEST(CorePagedBoxes, TheGatherTakesTheRest) {
  EXPECT_EQ(box_rows(100, 128, 256), 0) << "gcd 4: not a whole swizzle atom";
  EXPECT_EQ(box_rows(1, 128, 256), 0);
  EXPECT_EQ(box_rows(3, 64, 512), 0);
  EXPECT_EQ(box_rows(8, 128, 128), 0) << "D 64, page 8: 1 KB boxes";
  EXPECT_EQ(box_rows(40, 128, 128), 0) << "gcd 8 at D 64: 1 KB boxes";
  EXPECT_EQ(box_rows(0, 128, 256), 0);
}

}  // namespace
