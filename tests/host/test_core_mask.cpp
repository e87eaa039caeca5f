// Host tests of core/mask.hpp: key_range() and tile_fully_visible() against brute force over
// visible() for random shapes and windows, including seqlen_q > seqlen_k and zero lengths;
// visible() itself against hand-drawn pictures; packed rows (row_shift) against their tokens;
// the tiles covering a key range.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "flashbuf/core/mask.hpp"

namespace flashbuf {
namespace {

std::string show(const MaskParams& p) {
  return "sq=" + std::to_string(p.seqlen_q) + " sk=" + std::to_string(p.seqlen_k) +
         " wl=" + std::to_string(p.window_left) + " wr=" + std::to_string(p.window_right) +
         " shift=" + std::to_string(p.row_shift);
}

TEST(CoreMask, CausalBottomRightPicture) {
  // The picture in mask.hpp: sq = 3, sk = 5.
  const char* expected[3] = {"xxx..", "xxxx.", "xxxxx"};
  const MaskParams p = MaskParams::causal(3, 5);
  for (int q = 0; q < 3; ++q)
    for (int k = 0; k < 5; ++k) EXPECT_EQ(visible(p, q, k), expected[q][k] == 'x') << q << k;
  // More queries than keys: the first two rows see nothing.
  const MaskParams tall = MaskParams::causal(5, 3);
  for (int k = 0; k < 3; ++k) {
    EXPECT_FALSE(visible(tall, 0, k));
    EXPECT_FALSE(visible(tall, 1, k));
  }
  EXPECT_TRUE(visible(tall, 2, 0));
  EXPECT_FALSE(visible(tall, 2, 1));
  EXPECT_TRUE(key_range(tall, 0, 2).empty());
  // Sliding window (2, 1) on a square 6x6.
  const MaskParams w{6, 6, 2, 1};
  for (int q = 0; q < 6; ++q)
    for (int k = 0; k < 6; ++k) EXPECT_EQ(visible(w, q, k), k >= q - 2 && k <= q + 1);
  // Out-of-range coordinates are never visible.
  const MaskParams none = MaskParams::none(4, 4);
  EXPECT_FALSE(visible(none, -1, 0));
  EXPECT_FALSE(visible(none, 4, 0));
  EXPECT_FALSE(visible(none, 0, 4));
  EXPECT_FALSE(visible(none, 0, -1));
  EXPECT_TRUE(key_range(MaskParams::none(0, 7), 0, 16).empty());
  EXPECT_TRUE(key_range(MaskParams::none(7, 0), 0, 16).empty());
}

MaskParams random_params(std::mt19937& rng) {
  std::uniform_int_distribution<int> len(0, 40);
  std::uniform_int_distribution<int> window(-1, 12);
  std::uniform_int_distribution<int> kind(0, 4);
  MaskParams p{len(rng), len(rng), window(rng), window(rng)};
  switch (kind(rng)) {  // make the named modes common
    case 0: p = MaskParams::causal(p.seqlen_q, p.seqlen_k); break;
    case 1: p = MaskParams::none(p.seqlen_q, p.seqlen_k); break;
    default: break;
  }
  // Half of them over packed rows (a group of 2, 4 or 8 query heads per token).
  const int shift = std::uniform_int_distribution<int>(-3, 3)(rng);
  if (shift > 0) {
    p.row_shift = shift;
    p.seqlen_q <<= shift;
  }
  return p;
}

// A packed row sees exactly the keys its token sees unpacked, for every head of the group.
TEST(CoreMask, PackedRowSeesItsTokensKeys) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 1000; ++trial) {
    MaskParams tokens = random_params(rng);
    tokens.seqlen_q >>= tokens.row_shift;
    tokens.row_shift = 0;
    for (int shift = 1; shift <= 3; ++shift) {
      MaskParams rows = tokens;
      rows.row_shift = shift;
      rows.seqlen_q = tokens.seqlen_q << shift;
      for (int q = -2; q < rows.seqlen_q + 2; ++q)
        for (int k = -2; k < tokens.seqlen_k + 2; ++k) {
          const bool expected = q >= 0 && q < rows.seqlen_q && visible(tokens, q >> shift, k);
          ASSERT_EQ(visible(rows, q, k), expected) << show(rows) << " q=" << q << " k=" << k;
        }
    }
  }
}

TEST(CoreMask, KeyRangeIsTheExactHullOfVisibleKeys) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 3000; ++trial) {
    const MaskParams p = random_params(rng);
    std::uniform_int_distribution<int> qpos(-4, p.seqlen_q + 4);
    int q_begin = qpos(rng), q_end = qpos(rng);
    if (q_end < q_begin) std::swap(q_begin, q_end);
    int lo = p.seqlen_k, hi = -1, count = 0;
    for (int q = q_begin; q < q_end; ++q)
      for (int k = -2; k < p.seqlen_k + 2; ++k)
        if (visible(p, q, k)) {
          lo = std::min(lo, k);
          hi = std::max(hi, k);
          ++count;
        }
    const KeyRange r = key_range(p, q_begin, q_end);
    SCOPED_TRACE(show(p) + " q=[" + std::to_string(q_begin) + "," + std::to_string(q_end) + ")");
    if (count == 0) {
      EXPECT_TRUE(r.empty());
      EXPECT_EQ(r.begin, 0);
      EXPECT_EQ(r.end, 0);
    } else {
      EXPECT_EQ(r.begin, lo);
      EXPECT_EQ(r.end, hi + 1);
      // Exactness also means no gaps: every key in the hull is seen by some query.
      for (int k = r.begin; k < r.end; ++k) {
        bool seen = false;
        for (int q = q_begin; q < q_end && !seen; ++q) seen = visible(p, q, k);
        EXPECT_TRUE(seen) << "k=" << k;
      }
    }
  }
}

// The kernels mask a score by its row's own key range (kernels/prefill_common.cuh): for one
// query, visible() must be exactly membership in key_range(q, q + 1).
TEST(CoreMask, OneRowKeyRangeIsItsVisibleSet) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 500; ++trial) {
    const MaskParams p = random_params(rng);
    for (int q = -2; q < p.seqlen_q + 2; ++q) {
      const KeyRange r = key_range(p, q, q + 1);
      for (int k = -2; k < p.seqlen_k + 2; ++k)
        ASSERT_EQ(visible(p, q, k), k >= r.begin && k < r.end) << show(p) << " q=" << q << " k=" << k;
    }
  }
}

TEST(CoreMask, TileFullyVisibleMatchesBruteForce) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  int fully = 0, partly = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    const MaskParams p = random_params(rng);
    std::uniform_int_distribution<int> qpos(-2, p.seqlen_q + 2), kpos(-2, p.seqlen_k + 2);
    int q0 = qpos(rng), q1 = qpos(rng), k0 = kpos(rng), k1 = kpos(rng);
    if (q1 < q0) std::swap(q0, q1);
    if (k1 < k0) std::swap(k0, k1);
    bool all = true;
    for (int q = q0; q < q1; ++q)
      for (int k = k0; k < k1; ++k) all = all && visible(p, q, k);
    EXPECT_EQ(tile_fully_visible(p, q0, q1, k0, k1), all)
        << show(p) << " q=[" << q0 << "," << q1 << ") k=[" << k0 << "," << k1 << ")";
    (all ? fully : partly) += (q0 < q1 && k0 < k1);
  }
  // The random tiles exercised both answers.
  EXPECT_GT(fully, 100);
  EXPECT_GT(partly, 100);
}

// fully_visible_tiles is tile_fully_visible solved for the tile index: the same answer for
// every tile, including negative ones and tiles past the keys, for every query range.
TEST(CoreMask, FullyVisibleTilesMatchTileFullyVisible) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  int inside = 0, outside = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const MaskParams p = random_params(rng);
    std::uniform_int_distribution<int> qpos(-2, p.seqlen_q + 2), tiles(1, 9);
    int q0 = qpos(rng), q1 = qpos(rng);
    if (q1 < q0) std::swap(q0, q1);
    if (q0 == q1) ++q1;
    const int tile = tiles(rng);
    const TileSpan span = fully_visible_tiles(p, q0, q1, tile);
    EXPECT_LE(span.first, span.end);
    for (int n = -3; n * tile < p.seqlen_k + 3 * tile; ++n) {
      const bool whole = tile_fully_visible(p, q0, q1, n * tile, (n + 1) * tile);
      EXPECT_EQ(span.contains(n), whole) << show(p) << " q=[" << q0 << "," << q1 << ") tile " << tile << " n=" << n;
      (whole ? inside : outside) += 1;
    }
  }
  EXPECT_GT(inside, 1000);
  EXPECT_GT(outside, 1000);
}

// A Hopper consumer runs the tiles its warpgroup's 64 rows see whole without the mask
// (EveryTile), where each of its warps would have tested its own 16 rows' span: every tile of a
// row range's span must lie in the span of each of its parts.
TEST(CoreMask, ARangesFullyVisibleTilesAreEachPartsToo) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  static_assert(EveryTile::contains(-1) && EveryTile::contains(1 << 30));
  int shared = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const MaskParams p = random_params(rng);
    std::uniform_int_distribution<int> qpos(-2, p.seqlen_q + 2), tiles(1, 9), parts(1, 4), part_rows(1, 16);
    const int q0 = qpos(rng), rows = part_rows(rng), n_parts = parts(rng), tile = tiles(rng);
    const TileSpan whole = fully_visible_tiles(p, q0, q0 + n_parts * rows, tile);
    for (int part = 0; part < n_parts; ++part) {
      const TileSpan own = fully_visible_tiles(p, q0 + part * rows, q0 + (part + 1) * rows, tile);
      for (int n = whole.first; n < whole.end; ++n) {
        EXPECT_TRUE(own.contains(n)) << show(p) << " rows [" << q0 << ", +" << n_parts << " x " << rows << ") part "
                                     << part << " tile " << tile << " n=" << n;
        ++shared;
      }
    }
  }
  EXPECT_GT(shared, 1000);  // the property was tested on many non-empty spans
}

// The tiles covering a key range: every key of it in one of them, and no tile without a key.
TEST(CoreMask, KeyRangeTilesCoverItExactly) {
  EXPECT_EQ((KeyRange{0, 0}.tiles(64)), 0);
  EXPECT_EQ((KeyRange{0, 0}.first_tile(64)), 0);
  for (int tile : {1, 64, 128})
    for (int begin = 0; begin < 300; begin += 7)
      for (int end = begin + 1; end < 400; end += 13) {
        const KeyRange r{begin, end};
        const int first = r.first_tile(tile), n = r.tiles(tile);
        EXPECT_LE(first * tile, begin) << begin << " " << end << " tile " << tile;
        EXPECT_GT((first + 1) * tile, begin) << begin << " " << end << " tile " << tile;
        EXPECT_GE((first + n) * tile, end) << begin << " " << end << " tile " << tile;
        EXPECT_LT((first + n - 1) * tile, end) << begin << " " << end << " tile " << tile;
      }
}

}  // namespace
}  // namespace flashbuf
