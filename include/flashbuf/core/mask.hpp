// Core layer: which (query, key) pairs attend, and the key range / full-visibility tests
// a kernel uses to skip tiles and to skip per-element masking. One definition shared by
// the CPU backend, the kernels and the tests.
//
// Bottom-right alignment (FlashAttention >= 2.1, FlashInfer): query q sits at key position
//     diag(q) = q + seqlen_k - seqlen_q,
// so the last query lines up with the last key. Query q sees key k iff
//     0 <= q < seqlen_q,  0 <= k < seqlen_k,
//     window_left  < 0  or  k >= diag(q) - window_left,
//     window_right < 0  or  k <= diag(q) + window_right.
// Causal is (window_left, window_right) = (-1, 0). With seqlen_q > seqlen_k the first
// seqlen_q - seqlen_k causal rows see no key at all (output 0, LSE -inf).
//
//   causal, seqlen_q = 3, seqlen_k = 5 (x = visible):     k: 0 1 2 3 4
//                                                      q=0    x x x . .
//                                                      q=1    x x x x .
//                                                      q=2    x x x x x
//
// Packed rows (the Hopper prefill's GQA packing): with row_shift s > 0, "query" q is row q of
// a K/V head's packed sequence, token q >> s of query head q & (2^s - 1) of the head's group,
// and seqlen_q counts rows (tokens << s). Every test below then holds per row: the diagonal is
// the token's, and it still never decreases with q, so ranges over consecutive rows stay exact.
#pragma once

#include "flashbuf/core/config.hpp"

namespace flashbuf {

inline constexpr int kUnboundedWindow = -1;

struct MaskParams {
  int seqlen_q;
  int seqlen_k;
  int window_left;   // keys before the diagonal a query may see; < 0 = unbounded
  int window_right;  // keys after the diagonal a query may see; < 0 = unbounded
  int row_shift = 0;  // packed rows: q >> row_shift is the token (see above)
  // Positions and windows add in int: validation makes a window as wide as the sequences
  // unbounded (src/api/validate.cpp), so diagonal +- window cannot overflow.

  FLASHBUF_HOST_DEVICE static constexpr MaskParams none(int seqlen_q, int seqlen_k) {
    return {seqlen_q, seqlen_k, kUnboundedWindow, kUnboundedWindow};
  }
  FLASHBUF_HOST_DEVICE static constexpr MaskParams causal(int seqlen_q, int seqlen_k) {
    return {seqlen_q, seqlen_k, kUnboundedWindow, 0};
  }

  // Key position the query lines up with (bottom-right alignment).
  FLASHBUF_HOST_DEVICE constexpr int diagonal(int q) const {
    return (q >> row_shift) + seqlen_k - (seqlen_q >> row_shift);
  }
  FLASHBUF_HOST_DEVICE constexpr bool has_left_bound() const { return window_left >= 0; }
  FLASHBUF_HOST_DEVICE constexpr bool has_right_bound() const { return window_right >= 0; }
};

// Half-open [begin, end); empty when end <= begin.
struct KeyRange {
  int begin;
  int end;
  FLASHBUF_HOST_DEVICE constexpr bool empty() const { return end <= begin; }
  FLASHBUF_HOST_DEVICE constexpr int size() const { return empty() ? 0 : end - begin; }
  // The tiles of `tile` keys (aligned to multiples of `tile`) that cover the range:
  // first_tile(tile) .. first_tile(tile) + tiles(tile) - 1; none when empty.
  FLASHBUF_HOST_DEVICE constexpr int first_tile(int tile) const { return empty() ? 0 : begin / tile; }
  FLASHBUF_HOST_DEVICE constexpr int tiles(int tile) const { return empty() ? 0 : (end - 1) / tile - begin / tile + 1; }
};

FLASHBUF_HOST_DEVICE constexpr bool visible(const MaskParams& p, int q, int k) {
  if (q < 0 || q >= p.seqlen_q || k < 0 || k >= p.seqlen_k) return false;
  const int d = p.diagonal(q);
  if (p.has_left_bound() && k < d - p.window_left) return false;
  if (p.has_right_bound() && k > d + p.window_right) return false;
  return true;
}

// The keys any query in [q_begin, q_end) sees, exactly: [first visible key, last + 1).
// Queries outside [0, seqlen_q) (a padded last tile) are ignored. Empty ranges come back
// as {0, 0}. Exact because each query's window is an interval sliding by one key per
// query, so the union over consecutive queries is an interval too.
FLASHBUF_HOST_DEVICE constexpr KeyRange key_range(const MaskParams& p, int q_begin, int q_end) {
  const int q_first = q_begin < 0 ? 0 : q_begin;
  const int q_last = (q_end > p.seqlen_q ? p.seqlen_q : q_end) - 1;
  if (q_first > q_last || p.seqlen_k <= 0) return {0, 0};
  int begin = p.has_left_bound() ? p.diagonal(q_first) - p.window_left : 0;
  int end = p.has_right_bound() ? p.diagonal(q_last) + p.window_right + 1 : p.seqlen_k;
  if (begin < 0) begin = 0;
  if (end > p.seqlen_k) end = p.seqlen_k;
  if (end <= begin) return {0, 0};
  return {begin, end};
}

// True when every (q, k) in [q_begin, q_end) x [k_begin, k_end) is visible, so the tile
// needs no per-element mask (an empty tile is trivially fully visible). The binding
// queries are the last one for the left bound and the first one for the right bound.
FLASHBUF_HOST_DEVICE constexpr bool tile_fully_visible(const MaskParams& p, int q_begin,
                                                       int q_end, int k_begin, int k_end) {
  if (q_end <= q_begin || k_end <= k_begin) return true;
  if (q_begin < 0 || q_end > p.seqlen_q || k_begin < 0 || k_end > p.seqlen_k) return false;
  if (p.has_left_bound() && k_begin < p.diagonal(q_end - 1) - p.window_left) return false;
  if (p.has_right_bound() && k_end - 1 > p.diagonal(q_begin) + p.window_right) return false;
  return true;
}

// The key tiles (tile n = keys [n * tile, (n + 1) * tile)) that every query in [q_begin,
// q_end) sees whole, n in [first, end): tile_fully_visible's conditions solved for n once, so
// a kernel's per-tile test is two compares instead of ~20 instructions a tile (the bounds,
// the diagonal and the window each time). Needs q_begin < q_end and tile > 0; empty when a
// query lies outside [0, seqlen_q).
struct TileSpan {
  int first;
  int end;
  FLASHBUF_HOST_DEVICE constexpr bool contains(int n) const { return n >= first && n < end; }
};
// The span of every tile: where a loop runs only tiles it knew to be fully visible when it
// chose its bounds, so the per-tile test compiles away.
struct EveryTile {
  FLASHBUF_HOST_DEVICE static constexpr bool contains(int) { return true; }
};
FLASHBUF_HOST_DEVICE constexpr TileSpan fully_visible_tiles(const MaskParams& p, int q_begin, int q_end, int tile) {
  if (q_begin < 0 || q_end > p.seqlen_q) return {0, 0};
  int first = 0;
  int end = p.seqlen_k / tile;  // whole tiles inside the keys
  if (p.has_left_bound()) {     // k_begin >= diag(q_end - 1) - window_left
    const int lo = -floor_div(-(p.diagonal(q_end - 1) - p.window_left), tile);  // ceiling
    first = lo > 0 ? lo : 0;
  }
  if (p.has_right_bound()) {  // k_end - 1 <= diag(q_begin) + window_right
    const int hi = floor_div(p.diagonal(q_begin) + p.window_right + 1, tile);
    end = hi < end ? hi : end;
  }
  return {first, end > first ? end : first};
}

}  // namespace flashbuf
