// Core layer: the order in which a varlen prefill's query blocks are launched, longest first.
// A grid launched in (query block, head, sequence) order leaves a long sequence of a skewed
// batch (64 x 100 tokens + one of 8192) to the end of the launch, where its blocks run alone:
// the launch's tail. Ordered by their key work instead, the heaviest items start first and the
// short ones fill the SMs behind them (longest-processing-time-first list scheduling, as
// FlashAttention-3's varlen scheduler and FlashInfer's planner order their work).
//
// The order is a counting sort on the items' key tiles, computed on the device from
// cu_seqlens (no host synchronisation, so the call stays capturable in a CUDA graph): a
// histogram of buckets, an exclusive scan, then every item scattered to its bucket's next
// slot. Bucket 0 holds the heaviest items; items of kWorkOrderBuckets - 1 tiles or more share
// it. Within a bucket the order is free (the device scatter takes slots by atomics); the
// host's order_longest_first (tests) keeps sequence order there, heaviest query block first.
//
// The order table (int32): [0] the item count, then per rank r the pair [1 + 2r] sequence,
// [2 + 2r] query block (counted from the first). A sequence's query blocks are
// ceil(seqlen_q / block_m), so a batch of total_q query rows has at most
// total_q / block_m + batch items (work_order_capacity).
#pragma once

#include <cstdint>
#include <vector>

#include "flashbuf/core/config.hpp"
#include "flashbuf/core/gqa_packing.hpp"
#include "flashbuf/core/mask.hpp"

namespace flashbuf {

inline constexpr int kWorkOrderBuckets = 1024;

// The bucket of an item of `tiles` key tiles: 0 for the heaviest, kWorkOrderBuckets - 1 for
// items without keys (they still run: they write O = 0 and their LSE).
FLASHBUF_HOST_DEVICE constexpr int work_bucket(int tiles) {
  const int clamped = tiles < 0 ? 0 : tiles > kWorkOrderBuckets - 1 ? kWorkOrderBuckets - 1 : tiles;
  return kWorkOrderBuckets - 1 - clamped;
}

// The key tiles (of block_n keys) of query block `m_block` (block_m rows) under `mask`: the
// item's work, as the kernel's mainloop counts it.
FLASHBUF_HOST_DEVICE constexpr int item_key_tiles(const MaskParams& mask, int m_block, int block_m, int block_n) {
  return key_range(mask, m_block * block_m, (m_block + 1) * block_m).tiles(block_n);
}

// Query blocks of a sequence of `seqlen_q` rows (0 for an empty or malformed one).
FLASHBUF_HOST_DEVICE constexpr int query_blocks(int seqlen_q, int block_m) {
  return seqlen_q > 0 ? (seqlen_q + block_m - 1) / block_m : 0;
}

// Items a batch of `total_q` query rows in `batch` sequences can hold: sum of ceil(len / block_m)
// <= total_q / block_m + batch.
FLASHBUF_HOST_DEVICE constexpr std::int64_t work_order_capacity(std::int64_t total_q, int batch, int block_m) {
  return (total_q > 0 ? total_q / block_m : 0) + (batch > 0 ? batch : 0);
}

// The table's int32 entries for `capacity` items.
FLASHBUF_HOST_DEVICE constexpr std::int64_t work_order_entries(std::int64_t capacity) { return 1 + 2 * capacity; }

// Whether a varlen batch is skewed enough for the longest-first order to pay: its longest
// sequence (max_seqlen_q, an upper bound) holds more than twice the mean sequence's rows. A
// batch of like lengths gains nothing from the reordering and pays for its prologue and its
// heads-innermost walk, so it keeps the grid order (the A/B that decided it:
// bench/NOTES-prefill.md, "Varlen batches launched longest first").
FLASHBUF_HOST_DEVICE constexpr bool longest_first_pays(std::int64_t total_q, int batch, int max_seqlen_q) {
  return batch >= 2 && total_q > 0 && static_cast<std::int64_t>(max_seqlen_q) * batch > 2 * total_q;
}

struct OrderedItem {
  int batch, m_block;
};

// The host's order (tests; the device kernel sorts into the same buckets): every item of the
// batch, bucket by bucket, sequences in order and a sequence's heaviest query block first
// within a bucket. `seqlens_q` / `seqlens_k` per sequence; window bounds as in MaskParams;
// row_shift > 0: each token is 1 << row_shift query rows (packed GQA).
inline std::vector<OrderedItem> order_longest_first(const std::vector<int>& seqlens_q, const std::vector<int>& seqlens_k,
                                                    int window_left, int window_right, int block_m, int block_n,
                                                    int row_shift = 0) {
  std::vector<std::vector<OrderedItem>> buckets(kWorkOrderBuckets);
  for (int b = 0; b < static_cast<int>(seqlens_q.size()); ++b) {
    const MaskParams mask{packed_rows(seqlens_q[b], row_shift), seqlens_k[b], window_left, window_right, row_shift};
    for (int m = query_blocks(mask.seqlen_q, block_m) - 1; m >= 0; --m)
      buckets[work_bucket(item_key_tiles(mask, m, block_m, block_n))].push_back({b, m});
  }
  std::vector<OrderedItem> order;
  for (const auto& bucket : buckets) order.insert(order.end(), bucket.begin(), bucket.end());
  return order;
}

}  // namespace flashbuf
