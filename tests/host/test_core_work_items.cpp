// Host tests of core/work_items.hpp: a persistent grid's blocks take every item exactly once,
// in rounds of alternating direction.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "flashbuf/core/work_items.hpp"

namespace {

using flashbuf::WorkItems;

// Every item taken once, by some block in some round; the rounds of a block ascend.
void expect_cover(int total, int blocks) {
  SCOPED_TRACE("total " + std::to_string(total) + " blocks " + std::to_string(blocks));
  std::vector<int> taken(total, 0);
  for (int b = 0; b < blocks; ++b) {
    const WorkItems items{total, b, blocks};
    int previous = -1;
    for (int round = 0;; ++round) {
      const int item = items.at(round);
      if (item < 0) {
        for (int later = round + 1; later < round + 3; ++later) EXPECT_EQ(items.at(later), -1);
        break;
      }
      ASSERT_LT(item, total);
      EXPECT_GT(item, previous);
      previous = item;
      ++taken[item];
    }
  }
  for (int i = 0; i < total; ++i) EXPECT_EQ(taken[i], 1) << "item " << i;
}

TEST(CoreWorkItems, EveryItemOnceForAnyGrid) {
  for (int total : {1, 2, 7, 132, 133, 264, 265, 1000, 4096})
    for (int blocks : {1, 2, 5, 132, 264, 5000}) expect_cover(total, blocks);
}

// item_coords is a bijection onto (query block, head, sequence), a head's blocks heaviest first.
TEST(CoreWorkItems, ItemCoordsCoverEveryBlockOnce) {
  using flashbuf::item_coords;
  for (const int m_blocks : {1, 2, 5, 6, 43, 86})
    for (const int heads : {1, 3, 4}) {
      SCOPED_TRACE("m_blocks " + std::to_string(m_blocks) + " heads " + std::to_string(heads));
      const int batches = 3, total = m_blocks * heads * batches;
      std::vector<int> seen(total, 0);
      for (int item = 0; item < total; ++item) {
        const auto c = item_coords(item, m_blocks, heads);
        ASSERT_TRUE(c.m_from_last >= 0 && c.m_from_last < m_blocks && c.head >= 0 && c.head < heads && c.batch >= 0 &&
                    c.batch < batches);
        ++seen[(c.batch * heads + c.head) * m_blocks + c.m_from_last];
        EXPECT_EQ(c.m_from_last, item % m_blocks);
      }
      for (int i = 0; i < total; ++i) EXPECT_EQ(seen[i], 1) << "coordinate " << i;
    }
}

// The order by integer division, written from its definition: the oracle SectionOrder's
// multiplications are checked against.
flashbuf::GridItem sections_by_division(int block, int m_blocks, int pairs, int section) {
  const int lead = pairs % section;  // the short section's pairs, 0 for none
  int first = 0, width = lead;
  if (block >= lead * m_blocks) {
    first = lead + (block - lead * m_blocks) / (section * m_blocks) * section;
    width = section;
  }
  const int in_section = block - first * m_blocks;
  const int rank = in_section / width;
  return {rank, first + (in_section - rank * width)};
}

// SectionOrder is a bijection onto (query block, pair); within a section the blocks run
// heaviest first (query blocks counted from the last ascend), the section's pairs innermost;
// the sections follow each other, the short one (pairs % section) first. (A section of one
// pair is the grid's own order.)
TEST(CoreWorkItems, LongestFirstSectionsCoverEveryBlockOnce) {
  using flashbuf::SectionOrder;
  for (const int m_blocks : {1, 2, 5, 32, 43})
    for (const int pairs : {1, 3, 8, 10, 32})
      for (const int section : {1, 2, 3, 8, 12, 32}) {
        if (section > pairs) continue;
        SCOPED_TRACE("m_blocks " + std::to_string(m_blocks) + " pairs " + std::to_string(pairs) + " section " +
                     std::to_string(section));
        const int total = m_blocks * pairs, lead = pairs % section;
        const auto section_of = [&](int pair) { return pair < lead ? -1 : (pair - lead) / section; };
        std::vector<int> seen(total, 0);
        int previous_rank = 0, previous_section = -2;
        for (int block = 0; block < total; ++block) {
          const auto item = SectionOrder(section, m_blocks, pairs, 1).item(block);
          ASSERT_TRUE(item.m_from_last >= 0 && item.m_from_last < m_blocks && item.pair >= 0 && item.pair < pairs);
          ++seen[item.pair * m_blocks + item.m_from_last];
          const int in_section = section_of(item.pair);
          ASSERT_GE(in_section, previous_section);
          if (in_section == previous_section) EXPECT_GE(item.m_from_last, previous_rank);
          previous_section = in_section;
          previous_rank = item.m_from_last;
        }
        for (int i = 0; i < total; ++i) EXPECT_EQ(seen[i], 1) << "item " << i;
      }
}

// SectionOrder (the divisors made on the host) hands every block the item the divisions do,
// and splits its pair into the grid's head and sequence, up to grids of about 2^31 blocks.
TEST(CoreWorkItems, SectionOrderIsLongestFirstInSections) {
  using flashbuf::SectionOrder;
  for (const int m_blocks : {1, 2, 5, 17, 32, 43})
    for (const int heads : {1, 3, 8, 10})
      for (const int batch : {1, 2, 7})
        for (const int section : {2, 3, 4, 8, 12}) {
          const int pairs = heads * batch;
          if (section > pairs) continue;
          SCOPED_TRACE("m_blocks " + std::to_string(m_blocks) + " pairs " + std::to_string(pairs) + " section " +
                       std::to_string(section));
          const SectionOrder order(section, m_blocks, pairs, heads);
          ASSERT_TRUE(order.on());
          for (int block = 0; block < m_blocks * pairs; ++block) {
            const auto want = sections_by_division(block, m_blocks, pairs, section);
            const auto got = order.item(block);
            ASSERT_EQ(got.m_from_last, want.m_from_last) << "block " << block;
            ASSERT_EQ(got.pair, want.pair) << "block " << block;
            ASSERT_EQ(order.heads.div(got.pair), got.pair / heads);
          }
        }
  // Large grids: 2^31 - 1 blocks at most (longest_first_section's bound), sampled.
  for (const auto& [m_blocks, pairs, section, heads] : {std::array{65535, 32767, 7, 127},
                                                         std::array{1 << 16, (1 << 15) - 1, 12, 32767},
                                                         std::array{3, 715827882, 5, 96}}) {
    const SectionOrder order(section, m_blocks, pairs, heads);
    const long long total = static_cast<long long>(m_blocks) * pairs;
    ASSERT_LE(total, 0x7fffffffLL);
    for (long long block = 0; block < total; block += total / 4099 + 1) {
      for (const long long b : {block, total - 1 - block}) {
        const auto want = sections_by_division(static_cast<int>(b), m_blocks, pairs, section);
        const auto got = order.item(static_cast<int>(b));
        ASSERT_EQ(got.m_from_last, want.m_from_last) << "block " << b;
        ASSERT_EQ(got.pair, want.pair) << "block " << b;
        ASSERT_EQ(order.heads.div(got.pair), got.pair / heads);
      }
    }
  }
  EXPECT_FALSE(SectionOrder(0, 16, 80, 8).on());  // the grid's own order
  EXPECT_FALSE(SectionOrder(1, 16, 80, 8).on());
}

TEST(CoreWorkItems, LongestFirstSectionsOfAboutAWave) {
  using flashbuf::longest_first_section;
  using flashbuf::SectionOrder;
  using flashbuf::MaskParams;
  const MaskParams causal{4096, 4096, -1, 0};
  EXPECT_EQ(longest_first_section(causal, 16, 80, 132), 8);   // S 2k in 128-row blocks: 8 pairs of 16 a section
  EXPECT_EQ(longest_first_section(causal, 32, 40, 132), 4);   // S 4k
  EXPECT_EQ(longest_first_section(causal, 64, 20, 132), 2);   // S 8k
  EXPECT_EQ(longest_first_section(causal, 128, 10, 132), 0);  // S 16k: a pair a section, the grid's order
  EXPECT_EQ(longest_first_section(causal, 16, 5, 132), 5);    // fewer pairs than a section holds
  EXPECT_EQ(longest_first_section(MaskParams{4096, 4096, -1, -1}, 32, 40, 132), 0);  // items alike
  EXPECT_EQ(longest_first_section(MaskParams{4096, 4096, 100, -1}, 32, 40, 132), 0);
  EXPECT_EQ(longest_first_section(MaskParams{4096, 4096, 100, 0}, 32, 40, 132), 4);  // a window
  EXPECT_EQ(longest_first_section(causal, 1 << 20, 1 << 12, 132), 0);  // 2^32 blocks
  // 10 pairs in sections of 4: pairs 0-1 (the short one), then 2-5, then 6-9.
  const SectionOrder order(4, 3, 10, 10);
  EXPECT_EQ(order.item(0).pair, 0);
  EXPECT_EQ(order.item(1).pair, 1);
  EXPECT_EQ(order.item(2).m_from_last, 1);
  EXPECT_EQ(order.item(6).pair, 2);
  EXPECT_EQ(order.item(29).pair, 9);
  EXPECT_EQ(order.item(29).m_from_last, 2);
}

TEST(CoreWorkItems, OneItemPerBlockWhenTheGridCoversThem) {
  const WorkItems items{100, 37, 100};
  EXPECT_EQ(items.at(0), 37);
  EXPECT_EQ(items.at(1), -1);
}

TEST(CoreWorkItems, OddRoundsRunBackwards) {
  // 8 blocks over items of 4 query blocks per head, heaviest first: block 0 takes the heaviest
  // item of a head in round 0 and the lightest of another in round 1.
  const int blocks = 8, per_head = 4;
  for (int b = 0; b < blocks; ++b) {
    const WorkItems items{64, b, blocks};
    EXPECT_EQ(items.at(0) % per_head + items.at(1) % per_head, per_head - 1) << "block " << b;
    EXPECT_EQ(items.at(1), 2 * blocks - 1 - b);
  }
}

TEST(CoreWorkItems, MeanKeyTilesPerItem) {
  using flashbuf::MaskParams;
  using flashbuf::mean_key_tiles;
  EXPECT_DOUBLE_EQ(mean_key_tiles(MaskParams{512, 512, -1, -1}, 128, 128), 4.0);
  EXPECT_DOUBLE_EQ(mean_key_tiles(MaskParams{1000, 1000, -1, -1}, 128, 128), 8.0);  // 1000 keys: 8 tiles
  // Bottom-right causal, S 512: query blocks of 128 see 1, 2, 3, 4 tiles.
  EXPECT_DOUBLE_EQ(mean_key_tiles(MaskParams{512, 512, -1, 0}, 128, 128), 2.5);
  // Query blocks of 64 over tiles of 128 keys: 1, 1, 2, 2, ..., 8, 8.
  EXPECT_DOUBLE_EQ(mean_key_tiles(MaskParams{1024, 1024, -1, 0}, 64, 128), 4.5);
  EXPECT_DOUBLE_EQ(mean_key_tiles(MaskParams{0, 100, -1, -1}, 128, 128), 0.0);
}

TEST(CoreWorkItems, PersistentGridPaysForShortItems) {
  using flashbuf::persistent_grid_pays;
  EXPECT_TRUE(persistent_grid_pays(4.0, 2, 128));
  EXPECT_TRUE(persistent_grid_pays(8.5, 2, 128));     // D 128 causal S 2k
  EXPECT_TRUE(persistent_grid_pays(16.5, 2, 128));    // D 128 causal S 4k
  EXPECT_FALSE(persistent_grid_pays(32.0, 2, 128));   // D 128 S 4k: a block per item
  EXPECT_FALSE(persistent_grid_pays(32.5, 2, 96));    // D 96 causal S 8k
  EXPECT_FALSE(persistent_grid_pays(64.5, 2, 128));   // D 128 causal S 16k: the static walk's imbalance
  EXPECT_TRUE(persistent_grid_pays(128.0, 1, 64));    // D 64 S 16k: two consumers beat one at any length
  EXPECT_TRUE(persistent_grid_pays(9.0, 2, 192));     // D 192-128 causal S 1k
  EXPECT_FALSE(persistent_grid_pays(17.0, 2, 192));   // D 192-128 causal S 2k: a block per item
  EXPECT_FALSE(persistent_grid_pays(33.0, 2, 192));   // D 192-128 causal S 4k
  EXPECT_TRUE(persistent_grid_pays(17.0, 2, 256));    // D 256 causal S 2k
  EXPECT_TRUE(persistent_grid_pays(33.0, 2, 256));    // D 256 causal S 4k
  EXPECT_FALSE(persistent_grid_pays(64.5, 2, 256));   // D 256 causal S 8k
}

TEST(CoreWorkItems, ThreeConsumersForLongItems) {
  using flashbuf::mean_key_tiles;
  using flashbuf::MaskParams;
  using flashbuf::three_consumers_pay;
  // The BENCH.md grid's shapes (16k tokens, 32 heads) on 132 SMs.
  const auto pays = [](MaskParams m, int heads_x_batch = 0) {
    if (heads_x_batch == 0) heads_x_batch = 32 * (16384 / m.seqlen_q);
    return three_consumers_pay(m, mean_key_tiles(m, 128, 128), 192, heads_x_batch, 132);
  };
  EXPECT_FALSE(pays(MaskParams{1024, 1024, -1, -1}));   // 8 tiles
  EXPECT_FALSE(pays(MaskParams{1920, 1920, -1, -1}));   // 15 tiles
  EXPECT_TRUE(pays(MaskParams{2048, 2048, -1, -1}));    // 16 tiles
  EXPECT_TRUE(pays(MaskParams{16384, 16384, -1, -1}));
  EXPECT_TRUE(pays(MaskParams{16384, 16384, -1, 0}));   // causal
  EXPECT_TRUE(pays(MaskParams{8192, 8192, -1, 0}));     // causal, 32.5 tiles
  EXPECT_FALSE(pays(MaskParams{4096, 4096, -1, 0}));    // causal S 4k: 16.5 tiles
  EXPECT_FALSE(pays(MaskParams{2048, 2048, -1, 0}));    // causal S 2k: 8.5 tiles
  EXPECT_FALSE(pays(MaskParams{8192, 8192, 4096, -1}));  // a left window bound
  EXPECT_TRUE(pays(MaskParams{8192, 8192, -1, 4096}));   // a right one alone: ruled as causal
  // Under four waves of items (B 1, 8 heads, S 2k: 88 items), each SM would run one item either
  // way; four waves (528 items) are enough.
  EXPECT_FALSE(pays(MaskParams{2048, 2048, -1, -1}, 8));
  EXPECT_FALSE(pays(MaskParams{2048, 2048, -1, -1}, 47));  // 517 items
  EXPECT_TRUE(pays(MaskParams{2048, 2048, -1, -1}, 48));   // 528
  // Few queries over many keys: the last item's padding decides (1/16 of the rows at most).
  EXPECT_FALSE(pays(MaskParams{1024, 8192, -1, -1}, 512));  // 1152 rows for 1024
  EXPECT_FALSE(pays(MaskParams{300, 5000, -1, -1}, 512));
  EXPECT_TRUE(pays(MaskParams{2000, 8192, -1, -1}, 512));   // 2112 rows for 2000
}

}  // namespace
