// Host tests of core/gqa_packing.hpp and of packed rows in the work order: which launches pack,
// that a K/V head's packed rows are every (token, head) of its group once, and the key-tile
// passes packing saves on a varlen batch with short last blocks (the case it is for).
#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

#include "flashbuf/core/gqa_packing.hpp"
#include "flashbuf/core/work_order.hpp"

namespace flashbuf {
namespace {

TEST(CoreGqaPacking, PacksVarlenGroupsOfTwoFourEight) {
  EXPECT_EQ(gqa_pack_shift(2, true, 4096, 513, 128), 1);
  EXPECT_EQ(gqa_pack_shift(4, true, 4096, 513, 128), 2);
  EXPECT_EQ(gqa_pack_shift(8, true, 4096, 513, 128), 3);
  EXPECT_EQ(gqa_pack_shift(1, true, 4096, 513, 128), 0);    // MHA: nothing to pack
  EXPECT_EQ(gqa_pack_shift(16, true, 4096, 513, 128), 0);   // a copy run would split a group
  EXPECT_EQ(gqa_pack_shift(6, true, 4096, 513, 128), 0);    // not a power of two
  EXPECT_EQ(gqa_pack_shift(4, false, 4096, 513, 128), 0);   // batch form: keeps its TMA maps
  EXPECT_EQ(gqa_pack_shift(8, true, kMaxPackedRows / 8 + 1, 513, 128), 0);  // packed rows past the int bound
  EXPECT_EQ(gqa_pack_shift(8, true, kMaxPackedRows / 8, 513, 128), 3);
}

// Packing runs a block per item: only where the longest sequence's last block pads more than
// 1/16 of its rows (what packing saves) does it give up the persistent walk.
TEST(CoreGqaPacking, PackedRowsCountEveryHeadsRowsAndNeverOverflow) {
  EXPECT_EQ(packed_rows(513, 0), 513);
  EXPECT_EQ(packed_rows(513, 2), 2052);
  EXPECT_EQ(packed_rows(0, 3), 0);
  EXPECT_EQ(packed_rows(-5, 3), 0);  // a bad length read from device memory
  EXPECT_EQ(packed_rows(0x7fffffff, 3), (0x7fffffff >> 3) << 3);
  EXPECT_GT(packed_rows(0x7fffffff, 3), 0);
}

TEST(CoreGqaPacking, PacksWhereTheLongestSequencePadsItsLastBlock) {
  EXPECT_EQ(gqa_pack_shift(4, true, 31 * 513, 513, 128), 2);    // 127 of 640 rows padding
  EXPECT_EQ(gqa_pack_shift(4, true, 393, 131, 128), 2);         // 125 of 256
  EXPECT_EQ(gqa_pack_shift(4, true, 513, 513, 64), 2);          // 63 of 576 (D 64's 64-row blocks)
  EXPECT_EQ(gqa_pack_shift(4, true, 14592, 8192, 128), 0);      // whole blocks
  EXPECT_EQ(gqa_pack_shift(4, true, 24000, 8000, 128), 0);      // 64 of 8064
  EXPECT_EQ(gqa_pack_shift(4, true, 16384, 16384, 128), 0);
  EXPECT_EQ(gqa_pack_shift(4, true, 1000, 1000, 128), 0);       // 24 of 1024: 16 * 24 < 1024
  EXPECT_EQ(gqa_pack_shift(4, true, 1050, 1050, 128), 2);       // 102 of 1152: 16 * 102 > 1152
  EXPECT_EQ(gqa_pack_shift(4, true, 0, 0, 128), 0);             // no rows
}

// Rows r = 0 .. (tokens << s) - 1 are token r >> s of head r & (2^s - 1): each pair once.
TEST(CoreGqaPacking, RowsAreEveryTokenAndHeadOnce) {
  for (int s = 1; s <= 3; ++s)
    for (int tokens : {1, 7, 128, 513}) {
      std::set<std::pair<int, int>> seen;
      for (int r = 0; r < (tokens << s); ++r) {
        const int token = r >> s, head = r & ((1 << s) - 1);
        EXPECT_TRUE(seen.insert({token, head}).second) << "row " << r;
        EXPECT_LT(token, tokens);
      }
      EXPECT_EQ(seen.size(), static_cast<std::size_t>(tokens) << s);
    }
}

// Key-tile passes of a varlen batch, per K/V head, as the kernel walks them: every query block
// of every sequence reads item_key_tiles tiles (order_longest_first lists the blocks).
long long passes(const std::vector<int>& q, const std::vector<int>& k, int wr, int shift, int heads) {
  long long n = 0;
  const auto order = order_longest_first(q, k, -1, wr, 128, 128, shift);
  for (const OrderedItem& it : order) {
    const int rows = q[it.batch] << shift;
    n += item_key_tiles(MaskParams{rows, k[it.batch], -1, wr, shift}, it.m_block, 128, 128);
  }
  return n * (heads >> shift);  // unpacked: every query head of the group walks its own blocks
}

TEST(CoreGqaPacking, ShortLastBlocksShareTheirKeyTiles) {
  // 31 x 513 tokens, causal, 4 query heads per K/V head: 15 passes a head unpacked, 11.25 packed.
  const std::vector<int> q(31, 513), k(31, 513);
  EXPECT_EQ(passes(q, k, 0, 0, 4), 31LL * 4 * 15);
  EXPECT_EQ(passes(q, k, 0, 2, 4), 31LL * 45);
  // Whole blocks: the same passes either way (the diagonal's tiles are the same in all).
  const std::vector<int> q2(3, 1024), k2(3, 1024);
  EXPECT_EQ(passes(q2, k2, 0, 2, 4), passes(q2, k2, 0, 0, 4));
  EXPECT_EQ(passes(q2, k2, -1, 3, 8), passes(q2, k2, -1, 0, 8));
}

// The order over packed rows still lists every query block once.
TEST(CoreGqaPacking, OrderHoldsEveryPackedBlock) {
  const std::vector<int> q{100, 8192, 37, 0, 513}, k{100, 8192, 37, 5, 600};
  for (int s = 0; s <= 3; ++s) {
    const auto order = order_longest_first(q, k, -1, 0, 128, 128, s);
    std::set<std::pair<int, int>> seen;
    long long expected = 0, rows = 0;
    for (std::size_t b = 0; b < q.size(); ++b) {
      expected += query_blocks(q[b] << s, 128);
      rows += static_cast<long long>(q[b]) << s;
    }
    for (const OrderedItem& it : order) EXPECT_TRUE(seen.insert({it.batch, it.m_block}).second);
    EXPECT_EQ(static_cast<long long>(order.size()), expected);
    EXPECT_LE(expected, work_order_capacity(rows, static_cast<int>(q.size()), 128));
  }
}

}  // namespace
}  // namespace flashbuf
