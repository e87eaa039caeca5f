// Host tests: where append_kv places a new token (core/kv_append.hpp), inside and outside the
// cache, contiguous, indexed and paged.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "flashbuf/core/kv_append.hpp"

namespace {

using flashbuf::kv_append::place_of;

TEST(CoreKvAppend, ContiguousAndIndexed) {
  const std::vector<std::int32_t> lens{0, 7, -1};
  const std::vector<std::int32_t> rows{2, 0, 1};
  auto at = [&](int b, int i, const std::int32_t* idx) { return place_of(b, i, lens.data(), idx, nullptr, 0, 0, 8, 3); };
  EXPECT_EQ(at(0, 0, nullptr).first, 0);
  EXPECT_EQ(at(0, 3, nullptr).second, 3);
  EXPECT_EQ(at(1, 0, nullptr).second, 7);
  EXPECT_EQ(at(1, 1, nullptr).first, -1);  // position 8 of 8
  EXPECT_EQ(at(2, 0, nullptr).first, -1);  // position -1
  EXPECT_EQ(at(2, 1, nullptr).first, 2);
  EXPECT_EQ(at(0, 2, rows.data()).first, 2);
  const std::vector<std::int32_t> bad_rows{3, -1, 0};
  EXPECT_EQ(at(0, 0, bad_rows.data()).first, -1);
  EXPECT_EQ(at(1, 0, bad_rows.data()).first, -1);
}

TEST(CoreKvAppend, PagedThroughAStridedTable) {
  // Pages of 4 rows, 2 a sequence (capacity 8), a pool of 5; table rows 3 apart.
  const std::vector<std::int32_t> table{3, 1, 99, 4, 5, 99};
  const std::vector<std::int32_t> lens{2, 3};
  auto at = [&](int b, int i) { return place_of(b, i, lens.data(), nullptr, table.data(), 3, 2, 4, 5); };
  EXPECT_EQ(at(0, 0).first, 3);
  EXPECT_EQ(at(0, 0).second, 2);
  EXPECT_EQ(at(0, 2).first, 1);  // position 4: second page, row 0
  EXPECT_EQ(at(0, 2).second, 0);
  EXPECT_EQ(at(0, 6).first, -1);  // position 8: past the two pages
  EXPECT_EQ(at(1, 0).first, 4);
  EXPECT_EQ(at(1, 1).first, -1);  // page 5: outside the pool of 5
}

}  // namespace
