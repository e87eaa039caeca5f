// kernels: the prefill tile table (sm80-class mma.sync path), one row per head dim, each with
// its reason. Host- and device-visible so the launcher and the tests read the same numbers.
#pragma once

namespace flashbuf {

struct PrefillTile {
  int block_m;        // query rows per block
  int block_n;        // keys per K/V tile
  int warps;          // warps per block, stacked along the query rows
  int m_tiles;        // m16 row tiles per warp: block_m = 16 * m_tiles * warps
  bool q_in_registers;
};

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
  const int widest = head_dim > head_dim_v ? head_dim : head_dim_v;
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

}  // namespace flashbuf
