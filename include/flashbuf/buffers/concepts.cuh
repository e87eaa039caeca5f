// buffers: the four concepts of the seed's module. Every buffer type in this folder is
// followed by a static_assert that it models one of them.
//   KVBufferConfig  : the block tile of a K or V buffer, its warp tile and the axis it walks
//   KVBuffer        : device memory -> shared memory -> MMA fragments, in four operations
//   RegisterBuffer  : a register-resident tile (Q, P, O)
//   RegisterMMABuffer: a register buffer that also hands out MMA operand fragments
#pragma once

#include <concepts>

namespace flashbuf {

enum class IteratorAxis { head_dim, keys };

template <class C>
concept KVBufferConfig = requires {
  { C::kRows } -> std::convertible_to<int>;          // shared tile rows (always keys)
  { C::kCols } -> std::convertible_to<int>;          // shared tile columns (head dim)
  { C::kWarpTileN } -> std::convertible_to<int>;     // MMA N columns one warp covers per chunk
  { C::kMmaKSteps } -> std::convertible_to<int>;     // k-steps of 16 the MMA walks
  { C::kIteratorAxis } -> std::convertible_to<IteratorAxis>;
  { C::wtile_coord(0) } -> std::convertible_to<int>;  // first MMA-N index of warp-tile chunk i
};

// The seed's KVBuffer trait: load_from_dram, copy_to_shared[stage], load_from_shared[k_mma],
// get_mma_tile. `load_from_dram` starts moving a tile; `copy_to_shared<stage>` completes it
// into shared stage `stage`; `load_from_shared<k>` reads the fragments of MMA k-step k of
// warp-tile chunk `chunk`; `mma_tile()` returns them. A buffer of several shared stages fills
// and reads them in turn; a kernel whose pipeline orders them itself (the Hopper stage ring)
// names them: `write_to_stage(s)` (the stage the next load fills) and `read_from_stage(s)`
// (the stage load_from_shared reads).
template <class B>
concept KVBuffer = requires(B b, int tile_row, int rows_valid, int chunk, int stage) {
  typename B::Config;
  typename B::TensorCore;
  requires KVBufferConfig<typename B::Config>;
  { b.load_from_dram(tile_row, rows_valid) };
  { b.template copy_to_shared<0>() };
  { b.template load_from_shared<0>(chunk) };
  { b.mma_tile() };
  { b.write_to_stage(stage) };
  { b.read_from_stage(stage) };
};

template <class R>
concept RegisterBuffer = requires(R r) {
  { R::kRows } -> std::convertible_to<int>;
  { R::kCols } -> std::convertible_to<int>;
  { r.zero() };
};

template <class R>
concept RegisterMMABuffer = RegisterBuffer<R> && requires(R r, int m_tile) {
  typename R::TensorCore;
  { r.template mma_tile<0>(m_tile) };
};

// How P's A-operand fragments must be ordered for the V buffer that consumes them. On
// NVIDIA the m16n8k16 accumulator of two adjacent n8 tiles is exactly the A fragment of one
// k16 step (core/fragment.hpp tests this), so P needs no shuffle: `accumulator_as_a`.
enum class PFragmentOrder { accumulator_as_a };

}  // namespace flashbuf
