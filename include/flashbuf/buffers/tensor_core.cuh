// buffers: TiledTensorCore — the MMA description every buffer is parameterised by, with the
// seed's parameters TiledTensorCore[out_type, in_type, shape, group_size, transpose_b]:
//   Out, In     the accumulator type (fp32) and the input type (bf16 or fp16)
//   Shape       MmaShape<M, N, K> of one MMA instruction, the atom; it picks the instruction
//               and so the architecture layer: MmaShape<16, 8, 16> is mma.sync.m16n8k16
//               (arch/sm80, one warp, here), MmaShape<64, N, 16> is wgmma.m64nNk16 (arch/sm90,
//               one warpgroup, buffers/tensor_core_sm90.cuh)
//   GroupSize   atoms along K per k-step of the tiled product (the kernels issue one atom per
//               k-step and the buffers load one k-step's fragments at a time: 1)
//   TransposeB  whether B is stored N-major (V: keys x depth) and read transposed (ldmatrix.trans
//               on sm80, the descriptor's transpose on sm90); false for a K-major B (K)
// Both atoms keep each warp's accumulators in the m16n8 C-fragment layout (core/fragment.hpp),
// kFragM x kFragN per fragment: the register buffers (P, O) are built on that.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "flashbuf/arch/sm80/mma.cuh"
#include "flashbuf/buffers/smem_tile.cuh"
#include "flashbuf/core/fragment.hpp"

namespace flashbuf {

template <int M, int N, int K>
struct MmaShape {
  static constexpr int kM = M;
  static constexpr int kN = N;
  static constexpr int kK = K;
};

template <class Out, class In, class Shape, int GroupSize = 1, bool TransposeB = false>
struct TiledTensorCore;  // one specialisation per atom

namespace detail {
// What both atoms share: the element types, the per-warp accumulator fragment, and the
// conversion of fp32 accumulator pairs to packed 16-bit inputs (P as the A operand, O in the
// epilogues of prefill and decode).
template <class In, int GroupSize, bool TransposeB>
struct TensorCoreElements {
  static_assert(std::is_same_v<In, __nv_bfloat16> || std::is_same_v<In, __half>,
                "TiledTensorCore: inputs must be bf16 or fp16");
  static_assert(GroupSize == 1, "TiledTensorCore: the kernels issue one atom per k-step (group size 1)");
  using in_type = In;
  using out_type = float;
  static constexpr int kGroupSize = GroupSize;
  static constexpr bool kTransposeB = TransposeB;
  static constexpr int kFragM = mma_m16n8k16::kM;  // a warp's accumulator fragment: m16 x n8
  static constexpr int kFragN = mma_m16n8k16::kN;

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
};
}  // namespace detail

// The sm80 atom: mma.sync.aligned.m16n8k16.row.col, 16-bit inputs, fp32 accumulate, one warp.
// The instruction takes B "col" (K-major): a K tile (keys x head dim, K in smem) is read
// without a transpose; a V tile (keys x depth) is N-major, TransposeB, read through
// ldmatrix.trans into the same "col" fragments (VBufferTransposeLoads).
template <class In, int GroupSize, bool TransposeB>
struct TiledTensorCore<float, In, MmaShape<16, 8, 16>, GroupSize, TransposeB>
    : detail::TensorCoreElements<In, GroupSize, TransposeB> {
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
};

// The sm80 kernels' descriptions: B K-major (S = Q K^T) or N-major (O += P V).
template <class In, bool TransposeB = false>
using MmaSyncTensorCore = TiledTensorCore<float, In, MmaShape<16, 8, 16>, 1, TransposeB>;

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
