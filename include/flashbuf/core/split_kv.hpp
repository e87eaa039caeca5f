// Core layer: how many blocks to split the keys of a decode step into (split-KV, "flash
// decoding"), and how many keys each split takes. The plan depends only on maximum sizes,
// so a decode launch can be captured once in a CUDA graph and replayed for any lengths up
// to those maxima; per-sequence, splits beyond a shorter sequence's keys are empty (their
// partial LSE is -inf and the combine ignores them).
//
// Why split: decode has one (batch, kv-head) work item per block and few query rows, so a
// small batch leaves most SMs idle while one block streams a long KV cache. Splitting the
// keys multiplies the blocks; the price is a combine pass over num_splits partials.
#pragma once

#include <cstdint>

#include "flashbuf/core/config.hpp"
#include "flashbuf/core/mask.hpp"

namespace flashbuf {

namespace split_kv {
// Aim for this many blocks per SM: one wave cannot hide the tail of uneven sequence
// lengths; two keeps every SM busy while the combine cost stays small.
inline constexpr int kTargetWaves = 2;
// A split shorter than this spends more on its prologue, its partial write and the combine
// than it saves (several key tiles are needed to fill the load pipeline).
inline constexpr int kMinKeysPerSplit = 256;
inline constexpr int kMinTilesPerSplit = 2;
inline constexpr int kDefaultMaxSplits = 128;
}  // namespace split_kv

// Keys per split, a whole number of key tiles: ceil(max_seqlen_k / num_splits) rounded up
// to block_n. 0 when there are no keys.
FLASHBUF_HOST_DEVICE constexpr int keys_per_split(int max_seqlen_k, int num_splits,
                                                  int block_n) {
  if (max_seqlen_k <= 0) return 0;
  if (num_splits < 1) num_splits = 1;
  return round_up(ceil_div(max_seqlen_k, num_splits), block_n);
}

// Number of splits for a decode launch:
//   1 if the (batch x kv-head) blocks already fill every SM or the inputs are degenerate;
//   else ceil(kTargetWaves * sm_count / (batch * heads_kv)), capped so that every split has
//   at least max(kMinTilesPerSplit tiles, kMinKeysPerSplit keys) and at most max_splits;
//   finally reduced to the count that keys_per_split() actually fills, so no split is
//   empty at max_seqlen_k: keys_per_split * (n - 1) < max_seqlen_k <= keys_per_split * n.
// The result never grows with batch or heads_kv and never shrinks with sm_count or
// max_splits. It is not strictly monotone in max_seqlen_k (that last rounding can drop a
// few splits as the cache grows) but stays above 2/3 of the wave-based target: with t =
// ceil(T/s) tiles per split, n = ceil(T/t) > s T / (T + s) >= 2s/3 as T >= 2s.
FLASHBUF_HOST_DEVICE constexpr int choose_num_splits(int sm_count, int batch, int heads_kv,
                                                     int max_seqlen_k, int block_n,
                                                     int max_splits = split_kv::kDefaultMaxSplits) {
  if (sm_count <= 0 || batch <= 0 || heads_kv <= 0 || max_seqlen_k <= 0 || block_n <= 0 ||
      max_splits <= 1) {
    return 1;
  }
  const std::int64_t work_items = static_cast<std::int64_t>(batch) * heads_kv;
  if (work_items >= sm_count) return 1;

  const int key_tiles = ceil_div(max_seqlen_k, block_n);
  int min_tiles = ceil_div(split_kv::kMinKeysPerSplit, block_n);
  if (min_tiles < split_kv::kMinTilesPerSplit) min_tiles = split_kv::kMinTilesPerSplit;
  const int splits_by_work = key_tiles / min_tiles;  // may be 0 for short caches

  const std::int64_t wanted =
      ceil_div(static_cast<std::int64_t>(split_kv::kTargetWaves) * sm_count, work_items);
  int splits = wanted < max_splits ? static_cast<int>(wanted) : max_splits;
  if (splits > splits_by_work) splits = splits_by_work;
  if (splits < 1) return 1;
  // Tiles per split rounds up, which may leave trailing splits with nothing to do.
  return ceil_div(key_tiles, ceil_div(key_tiles, splits));
}

// The keys split `split` covers for a sequence of `seqlen_k` keys (possibly empty when the
// sequence is shorter than the maximum the plan was made for).
FLASHBUF_HOST_DEVICE constexpr KeyRange split_key_range(int seqlen_k, int split,
                                                        int keys_per_split) {
  const int begin = split * keys_per_split;
  const int end = begin + keys_per_split;
  if (begin >= seqlen_k) return {0, 0};
  return {begin, end < seqlen_k ? end : seqlen_k};
}

}  // namespace flashbuf
