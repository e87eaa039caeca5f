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

// Two m16 tiles per warp halve the shared-memory reads of K and V per FLOP (each B fragment
// feeds two MMAs); that costs registers (O is m_tiles * Dv / 2 floats per thread), so from
// D = 192 a warp keeps one m16 tile and the block has 8 warps to stay at 128 rows.
// Q stays in registers only where it fits beside O and S without spills (D = 64); above
// that it is re-read from shared memory each k-step (one ldmatrix.x4 per 2 x 8 MMAs).
// block_n = 64 everywhere: S costs m_tiles * block_n / 2 registers per thread.
constexpr PrefillTile prefill_tile(int head_dim, int head_dim_v) {
  const int widest = head_dim > head_dim_v ? head_dim : head_dim_v;
  if (widest <= 64) return {128, 64, 4, 2, true};
  if (widest <= 128) return {128, 64, 4, 2, false};
  return {128, 64, 8, 1, false};
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
