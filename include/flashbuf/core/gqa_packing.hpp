// Core layer: when the Hopper prefill packs the query heads of a K/V head into one sequence of
// rows (GQA packing, FlashAttention-4's pack_gqa): row r of a K/V head's packed sequence is
// token r >> shift of query head r & (2^shift - 1) of its group, so a block of 128 rows holds
// 128 >> shift tokens of all the group's heads, which read the same K/V tiles.
//
// What it changes is where a sequence's rows end: a varlen sequence whose length is not a
// multiple of the block ends, per head, in a block of few rows that still reads every key
// tile; packed, the group's heads share that block. 31 sequences of 513 tokens, causal, group
// 4: 15 key-tile passes a head unpacked against 11.25 packed (bench/NOTES-prefill.md, "The
// serving grid's GQA rows"). A batch-form problem of whole blocks reads the same tiles either
// way, and keeps its TMA maps of Q and O (which address unpacked rows), so only varlen launches
// pack; their Q and O go through cp.async.
#pragma once

#include <cstdint>

#include "flashbuf/core/config.hpp"

namespace flashbuf {

// Packed row r of a K/V head's group: its query head within the group, and its element offset
// from the group's first head's first token (tokens row_stride apart, heads head_stride apart).
FLASHBUF_HOST_DEVICE constexpr int packed_head(int r, int shift) { return r & ((1 << shift) - 1); }
FLASHBUF_HOST_DEVICE constexpr std::int64_t packed_row_offset(int r, int shift, std::int64_t row_stride,
                                                              std::int64_t head_stride) {
  return (r >> shift) * row_stride + packed_head(r, shift) * head_stride;
}

// A sequence's query rows where each token is 1 << shift rows (packed GQA; shift 0: its
// tokens), from a length read from device memory: negative lengths count 0 rows, and lengths
// are clamped so that no shift overflows an int.
FLASHBUF_HOST_DEVICE constexpr int packed_rows(int tokens, int shift) {
  const int most = 0x7fffffff >> shift;
  return tokens <= 0 ? 0 : (tokens < most ? tokens : most) << shift;
}

// The most packed rows a launch may count: int indices with a tile and a window to spare, as
// api/validate.cpp keeps every index (its kIndexSlack).
inline constexpr std::int64_t kMaxPackedRows = 0x7fffffff - 1024;

// log2 of the query rows per token of a Hopper prefill launch: log2(group) where it packs,
// else 0. Packs varlen problems of a group of 2, 4 or 8 query heads per K/V head (a copy's run
// of rows then steps whole groups: buffers/tile_copy.cuh) whose packed rows stay under
// kMaxPackedRows (all of q's rows, total_q << shift, since a sequence's length is clamped to
// them: PrefillBlock), and only where the longest sequence's last query block of `block_m`
// rows pads more than 1/16 of its rows: that padding is what packing saves, and a packed
// launch runs a block per item, so where little is saved the persistent walk's balance over a
// skewed batch is worth more (bench/NOTES-prefill.md, "Why packing lost on the skewed
// batches, and the rule"). Only the longest length is known on the host.
constexpr int gqa_pack_shift(int group, bool varlen, std::int64_t total_q, int max_seqlen_q, int block_m) {
  if (!varlen || max_seqlen_q <= 0 || block_m <= 0) return 0;
  const std::int64_t rows = (static_cast<std::int64_t>(max_seqlen_q) + block_m - 1) / block_m * block_m;
  if (16 * (rows - max_seqlen_q) <= rows) return 0;
  const int shift = group == 2 ? 1 : group == 4 ? 2 : group == 8 ? 3 : 0;
  return (total_q << shift) <= kMaxPackedRows ? shift : 0;
}

}  // namespace flashbuf
