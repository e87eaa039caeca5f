// Host tests of core/work_order.hpp: the longest-first order of a varlen batch's query blocks
// holds every item once, heaviest first, and puts a skewed batch's long sequence at the front.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "flashbuf/core/work_order.hpp"

namespace {

using flashbuf::item_key_tiles;
using flashbuf::kWorkOrderBuckets;
using flashbuf::longest_first_pays;
using flashbuf::MaskParams;
using flashbuf::order_longest_first;
using flashbuf::work_bucket;

int tiles_of(const flashbuf::OrderedItem& it, const std::vector<int>& q, const std::vector<int>& k, int wl, int wr,
             int bm, int bn) {
  return item_key_tiles(MaskParams{q[it.batch], k[it.batch], wl, wr}, it.m_block, bm, bn);
}

// Every (sequence, query block) once, key tiles never increasing along the order (up to the
// top bucket's clamp), and no more items than work_order_capacity allows.
void expect_order(const std::vector<int>& q, const std::vector<int>& k, int wl, int wr, int bm, int bn) {
  SCOPED_TRACE("window " + std::to_string(wl) + "," + std::to_string(wr) + " block " + std::to_string(bm) + "x" +
               std::to_string(bn));
  const auto order = order_longest_first(q, k, wl, wr, bm, bn);
  std::set<std::pair<int, int>> seen;
  long long expected = 0, total_q = 0;
  for (std::size_t b = 0; b < q.size(); ++b) {
    expected += flashbuf::query_blocks(q[b], bm);
    total_q += q[b] > 0 ? q[b] : 0;
  }
  ASSERT_EQ(static_cast<long long>(order.size()), expected);
  EXPECT_LE(expected, flashbuf::work_order_capacity(total_q, static_cast<int>(q.size()), bm));
  int previous = 1 << 30;
  for (const auto& it : order) {
    ASSERT_GE(it.batch, 0);
    ASSERT_LT(it.batch, static_cast<int>(q.size()));
    ASSERT_GE(it.m_block, 0);
    ASSERT_LT(it.m_block * bm, q[it.batch]);
    EXPECT_TRUE(seen.insert({it.batch, it.m_block}).second) << "item taken twice";
    const int tiles = std::min(tiles_of(it, q, k, wl, wr, bm, bn), kWorkOrderBuckets - 1);
    EXPECT_LE(tiles, previous);
    previous = tiles;
  }
}

TEST(CoreWorkOrder, BucketsDescendWithWork) {
  EXPECT_EQ(work_bucket(kWorkOrderBuckets + 5), 0);
  EXPECT_EQ(work_bucket(kWorkOrderBuckets - 1), 0);
  EXPECT_EQ(work_bucket(kWorkOrderBuckets - 2), 1);
  EXPECT_EQ(work_bucket(1), kWorkOrderBuckets - 2);
  EXPECT_EQ(work_bucket(0), kWorkOrderBuckets - 1);
  EXPECT_EQ(work_bucket(-3), kWorkOrderBuckets - 1);
  for (int t = 1; t < kWorkOrderBuckets + 3; ++t) EXPECT_LE(work_bucket(t), work_bucket(t - 1));
}

TEST(CoreWorkOrder, CapacityBoundsTheItems) {
  EXPECT_EQ(flashbuf::work_order_capacity(0, 0, 128), 0);
  EXPECT_EQ(flashbuf::work_order_capacity(513 * 31, 31, 128), 513 * 31 / 128 + 31);
  EXPECT_EQ(flashbuf::query_blocks(513, 128), 5);
  EXPECT_EQ(flashbuf::query_blocks(0, 128), 0);
  EXPECT_EQ(flashbuf::query_blocks(-4, 128), 0);
  EXPECT_EQ(flashbuf::work_order_entries(10), 21);
}

TEST(CoreWorkOrder, EveryItemOnceHeaviestFirst) {
  const std::vector<std::vector<int>> batches = {
      {4096, 512, 2048, 37, 8000, 1500}, {1}, {0, 129, 1, 300, 17}, std::vector<int>(31, 513), {200000, 5}};
  for (const auto& q : batches)
    for (int kv_extra : {0, 1000}) {
      std::vector<int> k(q);
      for (int& n : k) n += kv_extra;  // chunked prefill: keys of a cache before the queries
      for (int bm : {64, 128, 192})
        for (auto [wl, wr] : {std::pair{-1, -1}, std::pair{-1, 0}, std::pair{256, 0}, std::pair{100, 100}})
          expect_order(q, k, wl, wr, bm, 128);
    }
}

// 64 sequences of 100 tokens and one of 8192, causal, 128 x 128 tiles: the long sequence's
// 64 query blocks (64 .. 1 tiles) lead; the short ones (one tile each) follow them all.
TEST(CoreWorkOrder, SkewedBatchLongSequenceFirst) {
  std::vector<int> q(64, 100);
  q.push_back(8192);
  const auto order = order_longest_first(q, q, -1, 0, 128, 128);
  ASSERT_EQ(order.size(), 128u);
  for (int r = 0; r < 63; ++r) {
    EXPECT_EQ(order[r].batch, 64) << "rank " << r;
    EXPECT_EQ(order[r].m_block, 63 - r) << "rank " << r;
  }
  // The long sequence's first block (one tile) shares the last bucket with the short ones,
  // which keep sequence order there.
  for (int r = 63; r < 127; ++r) EXPECT_EQ(order[r].batch, r - 63) << "rank " << r;
  EXPECT_EQ(order[127].batch, 64);
  EXPECT_EQ(order[127].m_block, 0);
}

// Without a mask every block of a sequence has its whole key length: longer sequences first.
TEST(CoreWorkOrder, UnmaskedLongerSequencesFirst) {
  const std::vector<int> q = {300, 5000, 40, 1200};
  const auto order = order_longest_first(q, q, -1, -1, 128, 128);
  std::vector<int> first_rank(q.size(), -1);
  for (int r = static_cast<int>(order.size()) - 1; r >= 0; --r) first_rank[order[r].batch] = r;
  EXPECT_EQ(first_rank[1], 0);
  EXPECT_LT(first_rank[3], first_rank[0]);
  EXPECT_LT(first_rank[0], first_rank[2]);
}

// The serving grid's batches: the skewed ones are launched longest first, those of like
// lengths (and single sequences) in grid order.
TEST(CoreWorkOrder, LongestFirstOnlyForSkewedBatches) {
  EXPECT_TRUE(longest_first_pays(64 * 100 + 8192, 65, 8192));
  EXPECT_TRUE(longest_first_pays(4096 + 512 + 2048 + 37 + 8000 + 1500, 6, 8000));
  EXPECT_FALSE(longest_first_pays(31 * 513, 31, 513));
  EXPECT_FALSE(longest_first_pays(16384, 1, 16384));
  EXPECT_FALSE(longest_first_pays(0, 4, 0));
}

}  // namespace
