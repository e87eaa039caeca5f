// Host tests of core/split_kv.hpp: bounds and monotonicity of the split-KV heuristic, and
// that the splits tile the keys exactly with no empty split at the maximum length.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "flashbuf/core/split_kv.hpp"

namespace flashbuf {
namespace {

struct Case {
  int sm, batch, heads_kv, seqlen_k, block_n, max_splits;
  std::string str() const {
    return "sm=" + std::to_string(sm) + " b=" + std::to_string(batch) +
           " hkv=" + std::to_string(heads_kv) + " sk=" + std::to_string(seqlen_k) +
           " bn=" + std::to_string(block_n) + " max=" + std::to_string(max_splits);
  }
  int splits() const {
    return choose_num_splits(sm, batch, heads_kv, seqlen_k, block_n, max_splits);
  }
};

Case random_case(std::mt19937& rng) {
  const int block_ns[] = {32, 64, 128, 176, 256};
  std::uniform_int_distribution<int> sm(1, 160), batch(1, 64), heads(1, 16),
      seqlen(0, 1 << 17), pick(0, 4), max_splits(1, 256);
  return {sm(rng), batch(rng), heads(rng), seqlen(rng), block_ns[pick(rng)], max_splits(rng)};
}

TEST(CoreSplitKv, HandPickedDecodeShapes) {
  // H100 SXM (132 SMs), one sequence, 8 KV heads, 32k keys, 128-key tiles: 2 waves want
  // 33 splits; 256 tiles / 33 -> 8 tiles each -> 32 splits of 1024 keys.
  EXPECT_EQ(choose_num_splits(132, 1, 8, 32768, 128), 32);
  EXPECT_EQ(keys_per_split(32768, 32, 128), 1024);
  // The machine is already full: no split.
  EXPECT_EQ(choose_num_splits(132, 32, 8, 32768, 128), 1);
  // Short cache: at most one split per 256 keys.
  EXPECT_EQ(choose_num_splits(132, 1, 1, 600, 64), 2);
  EXPECT_EQ(choose_num_splits(132, 1, 1, 255, 64), 1);
  // Degenerate inputs.
  EXPECT_EQ(choose_num_splits(132, 1, 1, 0, 64), 1);
  EXPECT_EQ(choose_num_splits(0, 1, 1, 4096, 64), 1);
  EXPECT_EQ(keys_per_split(0, 4, 64), 0);
  // The cap is honoured.
  EXPECT_EQ(choose_num_splits(132, 1, 1, 1 << 20, 128, 16), 16);
}

TEST(CoreSplitKv, BoundsAndExactTiling) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 20000; ++trial) {
    const Case c = random_case(rng);
    SCOPED_TRACE(c.str());
    const int n = c.splits();
    ASSERT_GE(n, 1);
    ASSERT_LE(n, std::max(1, c.max_splits));
    const int tiles = ceil_div(c.seqlen_k, c.block_n);
    ASSERT_LE(n, std::max(1, tiles));
    if (static_cast<long>(c.batch) * c.heads_kv >= c.sm) {
      ASSERT_EQ(n, 1);
    }
    if (c.seqlen_k == 0) continue;
    const int kps = keys_per_split(c.seqlen_k, n, c.block_n);
    ASSERT_EQ(kps % c.block_n, 0);
    ASSERT_GE(static_cast<long>(kps) * n, c.seqlen_k);       // covers every key
    ASSERT_LT(static_cast<long>(kps) * (n - 1), c.seqlen_k);  // no empty split
    if (n > 1) {
      ASSERT_GE(kps, split_kv::kMinKeysPerSplit);
      ASSERT_GE(kps, split_kv::kMinTilesPerSplit * c.block_n);
      // Not more blocks than the target waves need (rounding may only lower n).
      ASSERT_LE(static_cast<long>(n) * c.batch * c.heads_kv,
                static_cast<long>(split_kv::kTargetWaves) * c.sm + c.batch * c.heads_kv);
    }
    // Any shorter sequence is tiled exactly by the same plan (empty splits allowed).
    const int seqlen = std::uniform_int_distribution<int>(0, c.seqlen_k)(rng);
    int next = 0;
    for (int split = 0; split < n; ++split) {
      const KeyRange r = split_key_range(seqlen, split, kps);
      if (r.empty()) continue;
      ASSERT_EQ(r.begin, next);
      ASSERT_LE(r.end - r.begin, kps);
      next = r.end;
    }
    ASSERT_EQ(next, seqlen);
  }
}

TEST(CoreSplitKv, Monotone) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 20000; ++trial) {
    const Case c = random_case(rng);
    SCOPED_TRACE(c.str());
    const int n = c.splits();
    Case more = c;
    ++more.batch;
    EXPECT_LE(more.splits(), n) << "more batch, not more splits";
    more = c;
    ++more.heads_kv;
    EXPECT_LE(more.splits(), n) << "more heads, not more splits";
    more = c;
    more.seqlen_k += std::uniform_int_distribution<int>(1, 4096)(rng);
    // Rounding splits to whole tiles may drop a few splits as the cache grows, but never
    // below 2/3 of the count for a shorter cache (see split_kv.hpp).
    EXPECT_GE(3 * more.splits(), 2 * n) << "longer cache, not much fewer splits";
    more = c;
    ++more.sm;
    EXPECT_GE(more.splits(), n) << "more SMs, not fewer splits";
    more = c;
    ++more.max_splits;
    EXPECT_GE(more.splits(), n) << "looser cap, not fewer splits";
  }
}

}  // namespace
}  // namespace flashbuf
