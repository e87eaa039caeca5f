// buffers: TiledTensorCore — the MMA description every buffer is parameterised by (the
// seed's TiledTensorCore[out_type, in_type, shape, group_size, transpose_b]). It names the
// element types, the atom shape and the instruction; fragments follow core/fragment.hpp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "flashbuf/arch/sm80/mma.cuh"
#include "flashbuf/buffers/smem_tile.cuh"
#include "flashbuf/core/fragment.hpp"

namespace flashbuf {

// The atom: mma.sync.aligned.m16n8k16.row.col, 16-bit inputs, fp32 accumulate. B is
// "col" (K-major): an N x K row-major shared tile (K in smem) is read without a transpose,
// a K x N row-major tile (V in smem) through ldmatrix.trans.
template <class In>
struct TiledTensorCore {
  static_assert(std::is_same_v<In, __nv_bfloat16> || std::is_same_v<In, __half>,
                "TiledTensorCore: inputs must be bf16 or fp16");
  using in_type = In;
  using out_type = float;
  static constexpr int kM = mma_m16n8k16::kM;
  static constexpr int kN = mma_m16n8k16::kN;
  static constexpr int kK = mma_m16n8k16::kK;
  using Tag = std::conditional_t<std::is_same_v<In, __nv_bfloat16>, sm80::Bf16Tag, sm80::Fp16Tag>;

  using AFragment = std::uint32_t[4];
  using CFragment = float[4];

  __device__ __forceinline__ static void mma(float (&d)[4], const std::uint32_t (&a)[4],
                                             std::uint32_t b0, std::uint32_t b1) {
    sm80::mma_m16n8k16_f32<Tag>(d, a, b0, b1);
  }

  // Two fp32 values -> one register of two 16-bit inputs (low half = first).
  __device__ __forceinline__ static std::uint32_t pack(float lo, float hi) {
    if constexpr (std::is_same_v<In, __nv_bfloat16>) {
      __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
      return *reinterpret_cast<std::uint32_t*>(&v);
    } else {
      __half2 v = __floats2half2_rn(lo, hi);
      return *reinterpret_cast<std::uint32_t*>(&v);
    }
  }
  __device__ __forceinline__ static In from_float(float x) {
    if constexpr (std::is_same_v<In, __nv_bfloat16>) {
      return __float2bfloat16_rn(x);
    } else {
      return __float2half_rn(x);
    }
  }
};

// A lane's ldmatrix address in a SwizzledTile, moved by whole MMA steps without re-deriving
// the swizzle, so a buffer keeps one address register instead of one per (k-step, n-tile)
// (those were hoisted out of the key loop and spilled). Moving by a multiple of 8 rows keeps
// row % 8, hence the swizzle: an add. Moving by 16-column steps inside a 64-column slab
// changes only chunk bits 4..5 of the element offset, which the swizzle XORs: an XOR.
//   offset(row + dr, col + dc) == (offset(row, col) ^ dc % 64) + dc / 64 * 64 + dr * pitch
// when dr % 8 == 0, dc % 16 == 0 and col % 64 is 0 or 8 (the start is in chunk 0 or 1).
template <class Tile>
struct SwizzledCursor {
  int base = 0;  // Tile::offset(row, col) of the lane's first read

  FLASHBUF_HOST_DEVICE constexpr SwizzledCursor(int row, int col) : base(Tile::offset(row, col)) {}
  FLASHBUF_HOST_DEVICE constexpr int at(int dr, int dc) const {
    return (base ^ dc % Tile::kAtomCols) + dc / Tile::kAtomCols * Tile::kAtomCols + dr * Tile::kPitch;
  }
};

namespace detail {
// Checks the identity above on every start row of an m16 tile, start chunk and step.
template <class Tile>
constexpr bool swizzled_cursor_matches() {
  for (int row = 0; row < 16; ++row)
    for (int col = 0; col < 16; col += 8)
      for (int dr = 0; dr + row < Tile::kRows; dr += 8)
        for (int dc = 0; dc + col < Tile::kCols; dc += 16)
          if (SwizzledCursor<Tile>(row, col).at(dr, dc) != Tile::offset(row + dr, col + dc)) return false;
  return true;
}
static_assert(swizzled_cursor_matches<SwizzledTile<64, 128>>());
static_assert(swizzled_cursor_matches<SwizzledTile<32, 96>>());
static_assert(swizzled_cursor_matches<SwizzledTile<16, 256>>());
}  // namespace detail

}  // namespace flashbuf
