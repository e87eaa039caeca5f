// Core layer: which thread holds which matrix element in the tensor-core instructions the
// arch layer wraps. Pure maps (lane, register element) -> (row, col), checked on the host;
// the buffers layer uses them to mask scores, write O and place P without guessing.
//
// Sources: PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type",
// "Matrix fragments for ldmatrix" and "Register Fragment: wgmma .m64nNk16"; the same maps
// appear as CuTe's SM80_16x8x16 ALayout/BLayout/CLayout and GMMA CLayout_64xN.
//
// Throughout: group = lane / 4 (the "groupID"), quad = lane % 4 ("threadID_in_group").
//
// mma.m16n8k16 A (16x16, 8 halves per lane in 4 registers; element i is half i%2 of a_{i/2}):
//
//            cols 0..7               cols 8..15
//   rows 0..7   a0: (g, 2q), (g, 2q+1)   a2: (g, 2q+8), (g, 2q+9)
//   rows 8..15  a1: (g+8, 2q) ...        a3: (g+8, 2q+8) ...
//
//   lane 0 holds (0,0) (0,1) (8,0) (8,1) (0,8) (0,9) (8,8) (8,9); lane 5 holds (1,2) (1,3) ...
//
// mma.m16n8k16 C/D (16x8 fp32, 4 per lane): c0,c1 at (g, 2q), (g, 2q+1); c2,c3 at row g+8.
// That is A's pattern for one 8-column half: two adjacent n8 C tiles, converted to 16-bit,
// ARE the A fragment of the next MMA (S -> P for P.V needs no shuffle).
#pragma once

#include "flashbuf/core/config.hpp"

namespace flashbuf {

struct RowCol {
  int row;
  int col;
  friend constexpr bool operator==(const RowCol&, const RowCol&) = default;
};

inline constexpr int kWarpSize = 32;

namespace mma_m16n8k16 {

inline constexpr int kM = 16;
inline constexpr int kN = 8;
inline constexpr int kK = 16;
inline constexpr int kAElemsPerLane = kM * kK / kWarpSize;  // 8 halves = 4 registers
inline constexpr int kBElemsPerLane = kK * kN / kWarpSize;  // 4 halves = 2 registers
inline constexpr int kCElemsPerLane = kM * kN / kWarpSize;  // 4 floats
inline constexpr int kLanesPerGroup = 4;  // the four lanes that share a row
inline constexpr int kHalfTile = 8;       // rows g and g+8; columns k and k+8

FLASHBUF_HOST_DEVICE constexpr int group_of(int lane) { return lane / kLanesPerGroup; }
FLASHBUF_HOST_DEVICE constexpr int quad_of(int lane) { return lane % kLanesPerGroup; }

// A (M x K, row-major), element i in 0..7.
FLASHBUF_HOST_DEVICE constexpr RowCol a_coord(int lane, int i) {
  const int upper_rows = (i >> 1) & 1;  // a1, a3
  const int upper_cols = (i >> 2) & 1;  // a2, a3
  return {group_of(lane) + kHalfTile * upper_rows,
          quad_of(lane) * 2 + (i & 1) + kHalfTile * upper_cols};
}

// B (K x N, "col" operand: each register holds two consecutive k of one n), element i in
// 0..3: (row = k, col = n).
FLASHBUF_HOST_DEVICE constexpr RowCol b_coord(int lane, int i) {
  const int upper_k = (i >> 1) & 1;  // b1
  return {quad_of(lane) * 2 + (i & 1) + kHalfTile * upper_k, group_of(lane)};
}

// C / D (M x N fp32), element i in 0..3.
FLASHBUF_HOST_DEVICE constexpr RowCol c_coord(int lane, int i) {
  const int upper_rows = (i >> 1) & 1;  // c2, c3
  return {group_of(lane) + kHalfTile * upper_rows, quad_of(lane) * 2 + (i & 1)};
}

}  // namespace mma_m16n8k16

// ldmatrix.sync.aligned.m8n8.x4.b16: four 8x8 matrices of 16-bit elements, one 16-byte row
// each per address. Lanes 8j..8j+7 supply the row addresses of matrix j; every lane then
// receives, in register j, row lane/4, columns 2*(lane%4) and +1 of matrix j -- the same
// (group, 2*quad) pattern as the mma fragments, which is why ldmatrix feeds mma directly.
namespace ldmatrix_x4 {

inline constexpr int kMatrices = 4;
inline constexpr int kMatrixRows = 8;
inline constexpr int kElemsPerLane = kMatrices * 2;  // 2 halves per register

struct MatrixRowCol {
  int matrix;
  int row;
  int col;
  friend constexpr bool operator==(const MatrixRowCol&, const MatrixRowCol&) = default;
};

// The matrix row whose 16-byte address lane `lane` supplies (col is always 0).
FLASHBUF_HOST_DEVICE constexpr MatrixRowCol address_coord(int lane) {
  return {lane / kMatrixRows, lane % kMatrixRows, 0};
}

// What lane `lane` receives as element i (0..7): register i/2, half i%2.
FLASHBUF_HOST_DEVICE constexpr MatrixRowCol dest_coord(int lane, int i) {
  return {i / 2, lane / 4, 2 * (lane % 4) + (i & 1)};
}

// Loading the 16x16 mma A tile: matrix j covers rows 8*(j%2).., cols 8*(j/2).. (matrix
// order a0, a1, a2, a3), so lane l points at row l%16, column 8*(l/16) of the tile.
FLASHBUF_HOST_DEVICE constexpr RowCol a_tile_matrix_origin(int matrix) {
  return {kMatrixRows * (matrix % 2), kMatrixRows * (matrix / 2)};
}
FLASHBUF_HOST_DEVICE constexpr RowCol a_tile_row_address(int lane) {
  const MatrixRowCol src = address_coord(lane);
  const RowCol origin = a_tile_matrix_origin(src.matrix);
  return {origin.row + src.row, origin.col};
}

// Loading B operands for two n8 tiles from an N x K row-major tile (K stored as keys x
// head dim): matrix j covers n rows 8*(j/2).., k cols 8*(j%2).. (b0, b1 of n-tile 0, then
// of n-tile 1). Lane l points at n row (l%8) + 8*(l/16), k column 8*((l/8)%2).
FLASHBUF_HOST_DEVICE constexpr RowCol b_tile_matrix_origin_nk(int matrix) {
  return {kMatrixRows * (matrix / 2), kMatrixRows * (matrix % 2)};
}
FLASHBUF_HOST_DEVICE constexpr RowCol b_tile_row_address_nk(int lane) {
  const MatrixRowCol src = address_coord(lane);
  const RowCol origin = b_tile_matrix_origin_nk(src.matrix);
  return {origin.row + src.row, origin.col};
}

}  // namespace ldmatrix_x4

// wgmma.mma_async.m64nNk16 fp32 accumulators of one 128-thread warpgroup: N/2 registers per
// thread. Warp w owns rows 16w..16w+15 and, within them, repeats the mma C pattern every
// 8 columns: register r = 4j + i is c_coord(lane, i) shifted to column 8j.
//
//   thread t, register r:  row = 16 (t/32) + (t%32)/4 + 8 ((r/2) % 2)
//                          col = 8 (r/4) + 2 (t%4) + r%2
namespace wgmma_m64nNk16 {

inline constexpr int kM = 64;
inline constexpr int kThreads = 128;
inline constexpr int kRowsPerWarp = 16;
inline constexpr int kRegsPerColBlock = 4;  // one 8-column block = 4 registers
inline constexpr int kColBlock = 8;

FLASHBUF_HOST_DEVICE constexpr int acc_regs(int n) { return kM * n / kThreads; }  // N/2

FLASHBUF_HOST_DEVICE constexpr RowCol acc_coord(int thread, int reg) {
  const int warp = thread / kWarpSize;
  const RowCol in_block = mma_m16n8k16::c_coord(thread % kWarpSize, reg % kRegsPerColBlock);
  return {kRowsPerWarp * warp + in_block.row, kColBlock * (reg / kRegsPerColBlock) + in_block.col};
}

}  // namespace wgmma_m64nNk16

}  // namespace flashbuf
