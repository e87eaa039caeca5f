// Host tests of the decode's plan arithmetic (kernels/decode_config.cuh and core/split_kv.hpp
// are plain constexpr C++): the page-size division, the split heuristic, the workspace layout. They run in CI;
// the decode kernel itself is tested in tests/gpu/test_decode.cu.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <utility>

#include "flashbuf/kernels/decode_config.cuh"

namespace {

namespace dk = flashbuf::kernels::decode;
using Merge = dk::SplitMerge;

TEST(DecodeHost, FastDivmodIsExact) {
  long bad = 0;
  for (int d = 1; d <= 256; ++d) {
    const flashbuf::FastDivmod f(d);
    for (int n = 0; n < 70000; ++n) bad += f.div(n) != n / d;
    for (int n = std::numeric_limits<int>::max() - 5000; n > 0 && n <= std::numeric_limits<int>::max() - 1; ++n) {
      bad += f.div(n) != n / d;
    }
  }
  EXPECT_EQ(bad, 0) << "page-size division by multiply-high gave wrong quotients";
}

TEST(DecodeHost, SplitHeuristicAndWorkspace) {
  // H200: 132 SMs, two D = 128 blocks per SM
  auto choose = [&](std::int64_t items, int keys, int max_cluster, bool prefer_cluster = false) {
    const dk::SplitChoice c = dk::choose_decode_splits(132, 2, items, keys, 64, max_cluster, prefer_cluster);
    return std::make_pair(c.num_splits, c.merge);
  };
  using P = std::pair<int, Merge>;
  EXPECT_EQ(choose(128 * 8, 2048, 16), P(1, Merge::none)) << "a full grid does not split";
  EXPECT_EQ(choose(32 * 8, 8192, 16), P(1, Merge::none)) << "256 items already fill one wave";
  // The cluster merge wherever it holds as many splits as the workspace would (<= 8 per
  // cluster, one block per SM; measured).
  EXPECT_EQ(choose(8, 512, 16), P(8, Merge::cluster)) << "B=1 Hkv=8 L=512: 64 blocks of one tile";
  EXPECT_EQ(choose(8, 2048, 16), P(8, Merge::cluster)) << "B=1 Hkv=8 L=2k: 64 blocks of four tiles";
  EXPECT_EQ(choose(8, 100, 16), P(2, Merge::cluster)) << "two tiles: one each";
  EXPECT_EQ(choose(8, 64, 16), P(1, Merge::none)) << "one tile cannot split";
  // Beyond 8, a cluster as large as the workspace's own count, of splits of <= 8 tiles.
  EXPECT_EQ(choose(8, 8192, 16), P(16, Merge::cluster)) << "B=1 Hkv=8 L=8k: 128 blocks in clusters of 16";
  EXPECT_EQ(choose(8, 3072, 16), P(12, Merge::cluster)) << "B=1 Hkv=8 L=3k: 12 splits of 4 tiles";
  EXPECT_EQ(choose(8, 8192, 8), P(16, Merge::workspace)) << "a device whose clusters hold 8";
  EXPECT_EQ(choose(8, 16384, 16), P(16, Merge::workspace)) << "B=1 Hkv=8 L=16k: splits of 16 tiles";
  // The workspace merge where a cluster would hold fewer splits: one block per SM where that keeps
  // >= 3/4 of the SMs busy, else the wave of resident blocks.
  EXPECT_EQ(choose(64, 512, 16), P(2, Merge::cluster)) << "B=8 Hkv=8 L=512: 128 blocks in clusters of 2";
  EXPECT_EQ(choose(32, 512, 16), P(4, Merge::cluster)) << "B=1 Hkv=32 L=512: 128 blocks in clusters of 4";
  EXPECT_EQ(choose(64, 2048, 16), P(2, Merge::cluster)) << "B=8 Hkv=8 L=2k: as many splits as the workspace's";
  EXPECT_EQ(choose(96, 512, 16), P(2, Merge::workspace)) << "a cluster of 2 would exceed one block per SM";
  EXPECT_EQ(choose(32, 2048, 16), P(4, Merge::workspace)) << "B=1 Hkv=32 L=2k: splits of 8 tiles";
  EXPECT_EQ(choose(32, 8192, 16), P(4, Merge::workspace)) << "B=1 Hkv=32 L=8k: long splits, clusters of 4";
  EXPECT_EQ(choose(64, 32768, 16), P(2, Merge::cluster)) << "B=8 Hkv=8 L=32k: long splits, pairs";
  EXPECT_EQ(choose(8, 32768, 16), P(16, Merge::workspace));
  EXPECT_EQ(choose(8, 131072, 16), P(16, Merge::workspace));
  EXPECT_EQ(choose(72, 32768, 16), P(3, Merge::workspace)) << "sms / items = 1 would leave 60 SMs idle";
  EXPECT_EQ(choose(8, 131072, 16, true), P(16, Merge::cluster)) << "FLASHBUF_DECODE_MERGE=cluster";
  // No clusters (sm_80, or FLASHBUF_DECODE_MERGE=workspace): >= max(2 tiles, 256 keys) per split.
  EXPECT_EQ(choose(8, 512, 0), P(2, Merge::workspace));
  EXPECT_EQ(choose(64, 32768, 0), P(2, Merge::workspace));
  EXPECT_EQ(choose(8, 100, 0), P(1, Merge::none)) << "too few keys to split";
  EXPECT_EQ(choose(8, 0, 16), P(1, Merge::none));
  // Clusters of more than 8 only where each of the items' clusters can sit one block per SM
  // (an H100 holds 7 clusters of 12 or of 16 blocks at one block per SM, bench/cluster_placement.cu);
  // else 8 splits of <= 8 tiles, else the large cluster all the same.
  int one_per_sm[flashbuf::split_kv::kMaxClusterSplits + 1] = {0, 132, 66, 44, 30, 22, 22, 15, 15};
  for (int c = 9; c <= flashbuf::split_kv::kMaxClusterSplits; ++c) one_per_sm[c] = 7;
  auto placed = [&](std::int64_t items, int keys) {
    const dk::SplitChoice c = dk::choose_decode_splits(132, 2, items, keys, 64, 16, false,
                                                       flashbuf::split_kv::kDefaultMaxSplits, one_per_sm);
    return std::make_pair(c.num_splits, c.merge);
  };
  EXPECT_EQ(placed(8, 4096), P(8, Merge::cluster)) << "B=1 Hkv=8 L=4k: 8 clusters of 16 would double 16 SMs";
  EXPECT_EQ(placed(8, 3072), P(8, Merge::cluster)) << "B=1 Hkv=8 L=3k: 8 splits of 6 tiles, not 12 of 4";
  EXPECT_EQ(placed(8, 8192), P(16, Merge::cluster)) << "8 splits would be of 16 tiles";
  EXPECT_EQ(placed(4, 4096), P(16, Merge::cluster)) << "B=1 Hkv=4 L=4k: 4 clusters of 16 sit one block per SM";
  EXPECT_EQ(placed(8, 2048), P(8, Merge::cluster)) << "no large cluster in question";
  EXPECT_EQ(placed(8, 16384), P(16, Merge::workspace));
  one_per_sm[16] = 0;  // unknown: as without the array
  EXPECT_EQ(placed(8, 4096), P(16, Merge::cluster));
  // Three blocks per SM: more items than SMs can still split, and take no cluster.
  EXPECT_EQ(dk::choose_decode_splits(132, 3, 150, 8192, 64, 16).merge, Merge::workspace);
  const auto w = dk::workspace_layout(3, 2, 4, 8, 128);
  EXPECT_EQ(w.o_parts_offset, 0u);
  EXPECT_EQ(w.lse_parts_offset, std::size_t(3) * 2 * 4 * 8 * 128 * 4);
  EXPECT_EQ(w.lse_parts_offset % dk::kWorkspaceAlignment, 0u);
  EXPECT_GE(w.bytes, w.lse_parts_offset + std::size_t(3) * 2 * 4 * 8 * 4);
  EXPECT_EQ(dk::workspace_layout(1, 2, 4, 8, 128).bytes, 0u) << "one split writes O directly";
  EXPECT_EQ(dk::split_keys(1000, 3, 64), 384);
  EXPECT_EQ(dk::split_keys(0, 3, 64), 0);
  EXPECT_EQ(dk::mtiles_for_rows(1), 1);
  EXPECT_EQ(dk::mtiles_for_rows(17), 2);
  EXPECT_EQ(dk::mtiles_for_rows(33), 4);
  EXPECT_EQ(dk::mtiles_for_rows(128), 8);
  EXPECT_EQ(dk::mtiles_for_rows(1000), 8);
}

TEST(DecodeHost, DeepRingForShortPagedSplitsAtOneBlockPerSm) {
  // H200: 132 SMs.
  EXPECT_TRUE(dk::choose_deep_ring(true, 8, 8, 4, Merge::workspace, 132, 0)) << "B=1 Hkv=8 paged L 2k, 64 blocks";
  EXPECT_FALSE(dk::choose_deep_ring(false, 8, 8, 4, Merge::workspace, 132, 0)) << "contiguous keeps the shared ring";
  EXPECT_FALSE(dk::choose_deep_ring(true, 64, 4, 2, Merge::workspace, 132, 0)) << "256 blocks: two per SM";
  EXPECT_TRUE(dk::choose_deep_ring(true, 8, 16, 8, Merge::cluster, 132, 16)) << "L 8k: 8 clusters of 16, 16 resident";
  // An H100 holds only 7 clusters of 16 at the deep ring's one block per SM
  // (bench/cluster_placement.cu): B=1 Hkv=8 L 8k keeps the shared ring.
  EXPECT_FALSE(dk::choose_deep_ring(true, 8, 16, 8, Merge::cluster, 132, 7)) << "L 8k: 8 clusters of 16, 7 resident";
  EXPECT_FALSE(dk::choose_deep_ring(true, 64, 2, 4, Merge::cluster, 132, 60)) << "64 pairs, 60 resident";
  EXPECT_TRUE(dk::choose_deep_ring(true, 1, 1, 2, Merge::none, 132, 0));
  // Longer splits keep the shared ring: B=8 Hkv=8 L 2k (2 splits of 16 tiles), B=1 Hkv=32 L 8k
  // (4 of 32), B=1 Hkv=8 L 32k (16 of 32).
  EXPECT_TRUE(dk::choose_deep_ring(true, 64, 2, flashbuf::split_kv::kDeepRingMaxTilesPerSplit, Merge::workspace, 132, 0));
  EXPECT_FALSE(dk::choose_deep_ring(true, 64, 2, 16, Merge::workspace, 132, 0));
  EXPECT_FALSE(dk::choose_deep_ring(true, 32, 4, 32, Merge::workspace, 132, 0));
  EXPECT_FALSE(dk::choose_deep_ring(true, 8, 16, 32, Merge::workspace, 132, 0));
}

// The rings' shared memory: the shared ring keeps the block counts per SM the split heuristic
// was measured with (H100/H200: 228 KB per SM, 1 KB reserved per block), the deep ring is
// deeper wherever a block's 227 KB allow it, and both hold the epilogue.
template <int D, int MT>
void expect_rings(int blocks_per_sm, int deep_stages) {
  using T = dk::DecodeTile<D, MT>;
  constexpr int kSmBytes = 228 * 1024, kReserved = 1024;
  EXPECT_EQ(kSmBytes / (T::kSmemBytes + kReserved), blocks_per_sm) << "D " << D << " MTiles " << MT;
  EXPECT_EQ(T::kDeepStages, deep_stages) << "D " << D << " MTiles " << MT;
  EXPECT_LE(T::kDeepSmemBytes, dk::kMaxSmemBytes);
  EXPECT_GE(T::kSmemBytes, T::kEpilogueBytes);
  EXPECT_GE(T::kDeepSmemBytes, T::kSmemBytes + (T::kDeepStages - T::kStages) * T::kStageBytes);
}

TEST(DecodeHost, RingsFitTheirBlocksPerSm) {
  expect_rings<64, 1>(3, 6);
  expect_rings<128, 1>(2, 6);
  expect_rings<128, 2>(2, 6);
  expect_rings<128, 8>(1, 5);
  expect_rings<256, 1>(1, 3);  // 64 KB stages: no deeper ring fits
}

}  // namespace
