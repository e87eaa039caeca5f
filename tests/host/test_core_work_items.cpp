// Host tests of core/work_items.hpp: a persistent grid's blocks take every item exactly once,
// in rounds of alternating direction.
#include <gtest/gtest.h>

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
  for (int total : {1, 7, 132, 133, 264, 1000, 4096})
    for (int blocks : {1, 2, 5, 132, 264, 5000}) expect_cover(total, blocks);
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

}  // namespace
