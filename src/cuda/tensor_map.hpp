// Host side of the TMA copies: the CUtensorMap that describes K or V of a batch-form tensor
// (batch, rows, heads, cols) — or of a page pool (pages, page rows, heads, cols) — in boxes of
// 64 columns x box_rows rows with the 128-byte swizzle, which is exactly a SlabTile slab (or
// box_rows of its rows; buffers/smem_tile_sm90.cuh).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "flashbuf/flashbuf.hpp"

namespace flashbuf::detail {

struct SlabTensor {
  const void* base;
  DType dtype;  // bf16 or fp16
  int cols, rows, heads, batch;  // batch: sequences, or the pool's pages
  std::int64_t row_stride, head_stride, batch_stride;  // elements
};

// Fills `map` and returns true, or returns false when TMA cannot describe the tensor (base or
// strides not 16-byte multiples, sizes out of range, no driver entry point): the kernel then
// copies with cp.async instead, so every valid input still runs. A box spans box_rows rows of
// box_heads heads (box_heads > 1: a view whose "rows" are a head group and whose "heads" are
// tokens, for GQA-packed rows, row r = token r / box_rows of head r % box_rows).
bool make_slab_tensor_map(CUtensorMap* map, const SlabTensor& t, int box_rows, int box_heads = 1);

}  // namespace flashbuf::detail
