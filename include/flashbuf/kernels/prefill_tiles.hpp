// kernels: the prefill tile tables, one per kernel, each row with its reason: the sm80-class
// mma.sync kernel's (prefill_tile) and the Hopper kernels' (prefill_sm90_tile). Host- and
// device-visible so the launchers and the tests read the same numbers.
#pragma once

#include "flashbuf/core/softmax_state.hpp"

namespace flashbuf {

struct PrefillTile {
  int block_m;        // query rows per block
  int block_n;        // keys per K/V tile
  int warps;          // warps per block, stacked along the query rows
  int m_tiles;        // m16 row tiles per warp: block_m = 16 * m_tiles * warps
  bool q_in_registers;
};

// The larger of a problem's two head dims: it sets the tiles and the Hopper softmax's choices.
constexpr int widest_head_dim(int head_dim, int head_dim_v) { return head_dim > head_dim_v ? head_dim : head_dim_v; }

// Chosen by timing every tile of a head dim in one run (bench/tune_prefill.cu; the numbers:
// bench/NOTES-prefill.md, "Measurements behind the code's choices"):
// - D <= 64: 128 x 128, two m16 tiles per warp (FlashAttention-2's tile): a B fragment feeds two
//   MMAs, and 128 keys per tile halve the barriers per FLOP; Q is re-read from shared memory
//   (in registers beside S, O and two K fragment sets it spills far more and runs slower).
// - D <= 128: 128 x 64, two m16 tiles per warp (128 keys: S and O leave no room).
// - above: 64 x 64 with four warps of one m16 tile (FlashAttention-2's tile for D 256): 96 KB of
//   shared memory and <= 255 registers let two blocks share an SM, so one block's barriers and
//   loads hide under the other's MMAs.
// Causal problems take the same tiles: with masking by row intervals (prefill_common.cuh), the
// smaller 64 x 64 tile does not pay at D 64 or D 128 causal.
constexpr PrefillTile prefill_tile(int head_dim, int head_dim_v) {
  const int widest = widest_head_dim(head_dim, head_dim_v);
  if (widest <= 64) return {128, 128, 4, 2, false};
  if (widest <= 128) return {128, 64, 4, 2, false};
  return {64, 64, 4, 1, false};
}

}  // namespace flashbuf

namespace flashbuf {

// A tile as a type (nvcc cannot take class-type template arguments on kernels), so that a
// tuning build can instantiate a kernel with a tile other than the table's.
template <int BlockM, int BlockN, int Warps, int MTiles, bool QInRegisters>
struct TileShape {
  static constexpr PrefillTile value{BlockM, BlockN, Warps, MTiles, QInRegisters};
};
template <int D, int Dv, PrefillTile T = prefill_tile(D, Dv)>
using TableTile = TileShape<T.block_m, T.block_n, T.warps, T.m_tiles, T.q_in_registers>;

// The Hopper kernels (prefill_sm90.cuh: a block per query block; prefill_sm90_persistent.cuh:
// a persistent grid walking the items). A block has one producer warpgroup and `consumers`
// consumer warpgroups of 64 query rows each (block_m = 64 * consumers); K/V tiles hold
// block_n keys.
struct PrefillSm90Tile {
  int consumers;
  int block_n;
};
// consumers:
//   block per item, max(D, Dv) <= 64   1: 64 query rows, and two blocks per SM hide each
//                                      other's pipeline fill and epilogue under their products
//                                      (short sequences lose most of their time there with one
//                                      block per SM); the two blocks' consumers take turns on
//                                      the tensor cores by themselves
//   block per item, above              2, in ping-pong turns
//   persistent grid                    2 at every head dim: the walk hides a block's start and
//                                      epilogue by itself
// (D 64 also launches a block per 192-row item with three consumers in round-robin turns where
// they pay: three_consumers_pay, core/work_items.hpp; its tile is the persistent grid's.)
// block_n: as many keys as S (block_n / 2 registers), the P fragments of the previous tile
// (block_n / 4) and O (Dv / 2) leave room for in a consumer's registers:
//   max(D, Dv) > 128, persistent grid  64 (its items are short: 80-key tiles waste a share of a
//                                      short sequence's keys on the last tile)
//   Dv <= 128                          128 (O takes at most 64 registers; at D 192 / Dv 128 two
//                                      80 KB K+V stages beside the 48 KB Q, as D 256's, and
//                                      faster than 80 or 96 keys from S 1k)
//   Dv > 128                           80 (FlashAttention-3's D 256 tile: 40 + 20 + 128
//                                      registers, two 80 KB K+V stages beside the 64 KB Q;
//                                      S = Q K^T of 80 keys reads a fifth less shared memory per
//                                      product than 64, which binds at D 192 / 256)
// (the measurements: bench/NOTES-prefill.md, "Measurements behind the code's choices")
constexpr PrefillSm90Tile prefill_sm90_tile(int head_dim, int head_dim_v, bool persistent = false) {
  const int widest = widest_head_dim(head_dim, head_dim_v);
  const int consumers = !persistent && widest <= 64 ? 1 : 2;
  if (persistent && widest > 128) return {consumers, 64};
  return {consumers, head_dim_v <= 128 ? 128 : 80};
}

// Where a Hopper consumer's steady tile waits for the previous tile's O += P V (both kernels),
// inside S's softmax, by the widest head dim. ptxas would hoist the wait to the softmax's top,
// where the warp idles until the product is done; FA4's comes after its rows' max and scaling,
// and finds it done (bench/NOTES-prefill.md, "Where FA4's steady tile is shorter" and the A/B
// after it):
//   up to 128   after the rows' max and the scores' scaling
//   above 128   between the two row halves (after the rows' max was slower there at D 192 / Dv
//               128 and mixed at D 256)
constexpr ScoresHook prefill_sm90_pv_wait(int head_dim, int head_dim_v) {
  const int widest = widest_head_dim(head_dim, head_dim_v);
  return widest > 128 ? ScoresHook::between_row_halves : ScoresHook::after_scaling;
}

// Where the wait follows the scaling, a Hopper consumer exponentiates the scores of each row's
// first 2 n8 tiles (4 a thread's row) before it (OnlineSoftmax::update_scores' EarlyExpTiles),
// so that the MUFU pipe starts under the scaling's FFMAs rather than after all of them (FA4
// interleaves the two as well); more exponentials hold the wait, and with it O's rescale, too
// long (measured: bench/NOTES-prefill.md, "Exponentials before the P V wait").
constexpr int prefill_sm90_early_exp_tiles(int head_dim, int head_dim_v) {
  return prefill_sm90_pv_wait(head_dim, head_dim_v) == ScoresHook::after_scaling ? 2 : 0;
}

// A Hopper consumer's softmax keeps each row's max until a tile's exceeds it by 2^slack
// (OnlineSoftmax's MaxSlackLog2; 0: every tile's max is taken, O rescaled every tile), by the
// widest head dim:
//   above 128   8 (P <= 256, FlashAttention-4's slack): after the first tiles no row moves, and
//               the steady tile skips O's rescale (Dv / 2 multiplies a thread) between its
//               softmax and its next issue turn
//   otherwise   0: the skip's test and branch cost as much as the D 64 / 128 rescale they save
// (measured: bench/NOTES-prefill.md, "Repeated by mistake", "The kept max with O's denominator
// made consistent" and "D 192 / Dv 128 joins D 256")
constexpr int prefill_sm90_max_slack_log2(int head_dim, int head_dim_v) {
  return widest_head_dim(head_dim, head_dim_v) > 128 ? 8 : 0;
}

}  // namespace flashbuf
