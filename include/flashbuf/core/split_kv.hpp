// Core layer: how many blocks split the keys of a decode step (split-KV, "flash decoding")
// and how their partial results merge. The plan depends only on maximum sizes, so a decode
// launch can be captured once in a CUDA graph and replayed for any lengths up to those
// maxima; per sequence, splits beyond a shorter sequence's keys are empty (their partial LSE
// is -inf and the merge ignores them). Host arithmetic, tested in tests/host/test_decode_plan.cpp;
// the decode kernel reads only the merge mode (kernels/decode_config.cuh re-exports the names).
//
// Why split: decode has one (sequence, kv head, row chunk) work item per block and few query
// rows, so a small batch leaves most SMs idle while one block streams a long KV cache.
// Splitting the keys multiplies the blocks; the price is a merge of num_splits partials.
#pragma once

#include <cstdint>

#include "flashbuf/core/config.hpp"

namespace flashbuf {

namespace split_kv {
// A split shorter than this spends more on its prologue, its partial write and the combine
// than it saves (several key tiles are needed to fill the load pipeline).
inline constexpr int kMinKeysPerSplit = 256;
inline constexpr int kMinTilesPerSplit = 2;
inline constexpr int kDefaultMaxSplits = 128;
inline constexpr int kMaxClusterSplits = 16;  // H100/H200 non-portable cluster limit
}  // namespace split_kv

// How the partial results of several splits become O.
//   cluster:   the splits of one (sequence, kv head, row chunk) form one thread-block cluster
//              (sm_90+, <= 16 blocks) and merge through distributed shared memory in the same
//              kernel: one launch, no workspace. A plan says so with num_splits > 1 and
//              workspace_bytes == 0.
//   workspace: fp32 partials in the workspace, folded by the combine kernel (merge_states)
//              launched after the decode (programmatic dependent launch on sm_90): any split
//              count, any architecture, but a second launch, which latency-bound rows feel.
// An in-kernel "last block merges" form needs arrival counters that start at zero; the
// workspace is caller memory (torch.empty), so that would change the API's contract.
enum class SplitMerge { none, cluster, workspace };

// Where the cluster merge pays (the measurements: bench/NOTES-decode.md, "Measurements behind the
// code's choices"): it saves the combine launch and the partials' round trip through device
// memory, so it wins wherever it can run as many splits as the workspace path would. It loses
// where it caps the splits below that, when its grid passes one block per SM (cluster
// co-scheduling leaves SMs idle), and with long splits in clusters of 4. So: one block per SM;
// clusters of up to 8 splits of at most 4 tiles (or pairs); larger clusters (to the device's 16)
// only with the workspace's own split count, of at most 8 tiles each (filling a larger cluster
// instead would cut the keys into more, shorter splits than the workspace takes, which loses),
// and only where those clusters can each sit one block per SM. Past the clusters of n > 8 blocks
// that fit the GPCs' free SMs one block each, the hardware places a further cluster two blocks
// to an SM (`bench/cluster_placement.cu`: on 132 SMs, 7 clusters of 16 fit one block per SM; the
// eighth shares 8 SMs), and a launch runs at the pace of its doubled SMs: 8 splits of up to 8
// tiles, in clusters of 8, then go faster (measured on an H100; longer splits than that lost paged
// and are not measured against the doubled clusters on an H200, so they keep the large cluster).
namespace split_kv {
inline constexpr int kClusterMaxSplitsUsed = 8;
inline constexpr int kClusterMaxTilesPerSplit = 4;
inline constexpr int kLargeClusterMaxTilesPerSplit = 8;
}  // namespace split_kv

struct SplitChoice {
  int num_splits = 1;
  SplitMerge merge = SplitMerge::none;
};

// Number of splits and their merge. Counts the blocks resident at once (slots = `sms` x
// `blocks_per_sm` of the kernel that will run) and keeps the grid to ONE wave: a second
// partial wave of long splits would run at a fraction of the read bandwidth.
//   1 when the (sequence, kv head, row chunk) items alone fill more than half the slots.
//   The workspace merge takes >= max(2 tiles, 256 keys) per split, as many splits as give one
//   block per SM (`sms`) where that keeps >= 3/4 of the SMs busy, else as many as fit in the
//   wave; at most max_splits.
//   The cluster merge (`max_cluster` = the largest cluster the kernel can be scheduled with on
//   the device, 0 = none) keeps the grid to at most one block per SM. It takes up to 8 splits
//   when that is at least the workspace's count, with splits of <= 4 tiles or clusters of 2, and
//   else merges the workspace's own count of more than 8 splits where the device's clusters hold
//   them and they are of <= 8 tiles (see above). Where `one_per_sm_clusters` (indexed by cluster
//   size: the clusters resident at once at one block per SM, 0 or null: unknown) says the items'
//   clusters of that size would not all sit one block per SM, 8 splits of <= 8 tiles instead.
//   `prefer_cluster` (FLASHBUF_DECODE_MERGE=cluster) drops those limits: as many splits as the
//   wave and the cluster allow, always merged in the cluster.
// The count is then reduced to the number whole-tile splits of max_seqlen_k fill evenly.
constexpr SplitChoice choose_decode_splits(int sms, int blocks_per_sm, std::int64_t work_items, int max_seqlen_k,
                                           int block_n, int max_cluster, bool prefer_cluster = false,
                                           int max_splits = split_kv::kDefaultMaxSplits,
                                           const int* one_per_sm_clusters = nullptr) {
  const int slots = sms * blocks_per_sm;
  if (slots <= 0 || work_items <= 0 || max_seqlen_k <= 0 || block_n <= 0 || max_splits <= 1) return {};
  if (2 * work_items > slots) return {};
  const int tiles = ceil_div(max_seqlen_k, block_n);
  auto balanced = [tiles](std::int64_t n) { return ceil_div(tiles, ceil_div(tiles, static_cast<int>(n))); };
  std::int64_t wave = slots / work_items;  // splits of >= 1 tile that fit in one wave
  if (wave > tiles) wave = tiles;
  if (wave > max_splits) wave = max_splits;
  // Workspace splits: one block per SM where that still fills most SMs: one block's stages
  // already keep enough bytes in flight, and every extra split is one more partial O to write
  // and merge. Where sms / items rounds far down (e.g. 72 items: 1 split, 72 of 132 SMs busy),
  // the slots' wave stays. Paged caches alike, since their copies read every pass's page entry
  // first (the measurements: bench/NOTES-decode.md, "Measurements behind the code's choices").
  std::int64_t workspace_wave = wave;
  const std::int64_t sm_wave = sms / work_items;
  if (sm_wave * work_items * 4 >= 3LL * sms && sm_wave < wave) workspace_wave = sm_wave;
  int min_tiles = ceil_div(split_kv::kMinKeysPerSplit, block_n);
  if (min_tiles < split_kv::kMinTilesPerSplit) min_tiles = split_kv::kMinTilesPerSplit;
  const std::int64_t splits = workspace_wave < tiles / min_tiles ? workspace_wave : tiles / min_tiles;
  if (wave > 1 && max_cluster > 1) {
    std::int64_t c = wave < max_cluster ? wave : max_cluster;
    if (prefer_cluster) return {balanced(c), SplitMerge::cluster};
    if (c > sms / work_items) c = sms / work_items;  // one block per SM at most (may be 0)
    const std::int64_t small = c < split_kv::kClusterMaxSplitsUsed ? c : split_kv::kClusterMaxSplitsUsed;
    if (small > 1 && small >= splits) {
      const bool short_splits = ceil_div(tiles, static_cast<int>(small)) <= split_kv::kClusterMaxTilesPerSplit;
      if (short_splits || small == 2) return {balanced(small), SplitMerge::cluster};
    }
    if (splits > split_kv::kClusterMaxSplitsUsed && splits <= c &&
        ceil_div(tiles, static_cast<int>(splits)) <= split_kv::kLargeClusterMaxTilesPerSplit) {
      const int large = balanced(splits);
      const int spread = one_per_sm_clusters == nullptr ? 0 : one_per_sm_clusters[large];
      const bool doubled = spread > 0 && work_items > spread;
      if (doubled && small == split_kv::kClusterMaxSplitsUsed &&
          ceil_div(tiles, static_cast<int>(small)) <= split_kv::kLargeClusterMaxTilesPerSplit) {
        return {balanced(small), SplitMerge::cluster};
      }
      return {large, SplitMerge::cluster};
    }
  }
  if (splits <= 1) return {};
  return {balanced(splits), SplitMerge::workspace};
}

// Whether a launch of `items` (sequence, kv head, row chunk) x `num_splits` blocks, each split of
// at most `tiles_per_split` key tiles, runs the deep ring (kernels/decode_config.cuh's
// DecodeTile::kDeepStages): paged caches in grids of at most one block per SM, whose clusters
// (cluster merge) all stay resident with the deep ring's shared memory (`clusters_resident` of
// num_splits blocks at once), and whose splits are short enough that the ring holds most of one
// in flight. It pays for the short paged splits, where each tile's copies wait on its page
// entries; contiguous caches run slower with it, so they keep the shared ring, and so do paged
// splits of more than 8 tiles, which ran level or slower with it (the measurements:
// bench/NOTES-decode.md, "Measurements behind the code's choices").
namespace split_kv {
inline constexpr int kDeepRingMaxTilesPerSplit = 8;
}  // namespace split_kv

constexpr bool choose_deep_ring(bool paged, std::int64_t items, int num_splits, int tiles_per_split, SplitMerge merge,
                                int sms, int clusters_resident) {
  if (!paged || items * num_splits > sms || tiles_per_split > split_kv::kDeepRingMaxTilesPerSplit) return false;
  return merge != SplitMerge::cluster || items <= clusters_resident;
}

}  // namespace flashbuf
