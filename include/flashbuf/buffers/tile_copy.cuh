// buffers: the cp.async copy of a Rows x Cols tile (16-bit elements) from rows in device memory
// into a shared tile of any layout with offset(row, col) (SlabTile, SwizzledTile), by
// NumThreads threads, with the address work per run of chunks instead of per chunk.
//
// Chunk c of the tile (row-major, 16 bytes) is copied by thread c % NumThreads, in pass
// c / NumThreads. kPasses passes after any chunk, its thread is back in the same column,
// kStepRows rows down, kStepRows a multiple of 8: the swizzle (a function of row % 8) is
// unchanged, so the shared offset moves by the constant offset(kStepRows, 0), and the source
// row by a constant stride (paged: by whole pages and rows, see KVSource::PagedRows). A
// thread's chunks are kPasses runs of rows row_j + s * kStepRows in one column:
//
//   128 threads   D 64: 1 run, 16 rows apart   D 128: 1 run, 8 apart    D 256: 2 runs, 8 apart
//                 D 96: 3 runs, 32 rows apart  D 192: 3 runs, 16 apart
#pragma once

#include <cstdint>
#include <numeric>

#include "flashbuf/arch/sm80/cp_async.cuh"
#include "flashbuf/core/config.hpp"
#include "flashbuf/core/gqa_packing.hpp"

namespace flashbuf {

template <class Tile, int NumThreads>
struct ChunkRuns {
  static constexpr int kChunksPerRow = Tile::kCols / 8;
  static constexpr int kPasses = 8 * kChunksPerRow / std::gcd(NumThreads, 8 * kChunksPerRow);
  static constexpr int kStepRows = kPasses * NumThreads / kChunksPerRow;
  static constexpr int kSteps = ceil_div(Tile::kRows, kStepRows);
  static constexpr int kStepElems = Tile::offset(kStepRows, 0) - Tile::offset(0, 0);
  static_assert(kStepRows % 8 == 0);

  // First row and column of run j of `thread`.
  FLASHBUF_HOST_DEVICE static constexpr int row(int thread, int j) { return (thread + j * NumThreads) / kChunksPerRow; }
  FLASHBUF_HOST_DEVICE static constexpr int col(int thread, int j) {
    return (thread + j * NumThreads) % kChunksPerRow * 8;
  }

  // The runs visit exactly the chunks of the pass loop, at the same shared offsets.
  static constexpr bool matches_pass_loop() {
    for (int t = 0; t < NumThreads; ++t)
      for (int j = 0; j < kPasses; ++j)
        for (int s = 0; s < kSteps; ++s) {
          const int chunk = t + (j + s * kPasses) * NumThreads;
          const int r = row(t, j) + s * kStepRows;
          if ((r < Tile::kRows) != (chunk < Tile::kRows * kChunksPerRow)) return false;
          if (r < Tile::kRows && (r != chunk / kChunksPerRow || col(t, j) != chunk % kChunksPerRow * 8 ||
                                  Tile::offset(row(t, j), col(t, j)) + s * kStepElems !=
                                      Tile::offset(r, chunk % kChunksPerRow * 8)))
            return false;
        }
    return true;
  }
};

// Rows [0, rows) of the tile from device memory (rows >= 1), rows past `rows` zero-filled.
// Called by threads 0 .. NumThreads - 1 only (each has fixed runs; another would write past
// the tile).
// rows_at(row, col) returns a walk over the source rows row, row + kStepRows, ... at column
// col: get(valid) the current row's address, next(more) one step (`more`: the next row is
// valid). Zero-filled chunks still need a readable address: a walk either stays on its last
// valid row (strided) or reads no page-table entry past the end (paged), so no select per chunk.
template <class Tile, int NumThreads, class In, class RowsAt>
__device__ __forceinline__ void copy_tile_async(In* smem, int rows, RowsAt&& rows_at) {
  using R = ChunkRuns<Tile, NumThreads>;
  static_assert(R::matches_pass_loop(), "copy_tile_async: runs differ from the pass loop");
  const int thread = threadIdx.x;
#pragma unroll 1
  for (int j = 0; j < R::kPasses; ++j) {
    const int row = R::row(thread, j), col = R::col(thread, j);
    In* dst = smem + Tile::offset(row, col);
    auto src = rows_at(row < rows ? row : 0, col);
#pragma unroll 4
    for (int s = 0; s < R::kSteps; ++s) {
      const int r = row + s * R::kStepRows;
      if (Tile::kRows % R::kStepRows != 0 && r >= Tile::kRows) break;  // a last, partial pass
      sm80::cp_async_cg_16(dst + s * R::kStepElems, src.get(r < rows), r < rows);
      src.next(r + R::kStepRows < rows);
    }
  }
}

// A thread's run of rows, a fixed number of elements apart per step (a strided matrix's rows
// kStepRows apart, or a packed GQA tile's rows of one head).
template <class T>
struct SteppedRows {
  const T* ptr;
  std::int64_t step;
  __device__ const T* get(bool /*valid*/) const { return ptr; }
  __device__ void next(bool more) {
    if (more) ptr += step;
  }
};

// Rows [0, rows) of a packed GQA tile (PrefillParams::pack_shift = shift): row r is token
// r >> shift (row_stride elements apart) of head r & (2^shift - 1) (head_stride apart) from src.
// A thread's run steps kStepRows rows, a multiple of 8, so of the group (at most 8 heads): the
// same head, kStepRows >> shift tokens on. Rows past `rows` are zero-filled.
template <class Tile, int NumThreads, class In>
__device__ void load_tile_async_packed(In* smem, const In* src, std::int64_t row_stride, std::int64_t head_stride,
                                       int shift, int rows) {
  constexpr int kStepRows = ChunkRuns<Tile, NumThreads>::kStepRows;
  copy_tile_async<Tile, NumThreads>(smem, rows, [&](int row, int col) {
    return SteppedRows<In>{src + packed_row_offset(row, shift, row_stride, head_stride) + col,
                           (kStepRows >> shift) * row_stride};
  });
}

// Rows [0, rows) of a rows x Cols tile at src (row_stride elements apart) into a shared tile;
// rows past `rows` are zero-filled.
template <class Tile, int NumThreads, class In>
__device__ void load_tile_async(In* smem, const In* src, std::int64_t row_stride, int rows) {
  copy_tile_async<Tile, NumThreads>(smem, rows, [&](int row, int col) {
    return SteppedRows<In>{src + row * row_stride + col, ChunkRuns<Tile, NumThreads>::kStepRows * row_stride};
  });
}

// The same copy as one loop over chunks with its address work per chunk, left to the compiler
// to unroll: for a kernel that loads the tile once and runs at its register limit (the
// mma.sync prefill's Q), where the run loops' state spills (68 bytes at D 128).
template <class Tile, int NumThreads, class In>
__device__ __forceinline__ void load_tile_async_per_chunk(In* smem, const In* src, std::int64_t row_stride, int rows) {
  constexpr int kChunksPerRow = Tile::kCols / 8;
  for (int chunk = threadIdx.x; chunk < Tile::kRows * kChunksPerRow; chunk += NumThreads) {
    const int r = chunk / kChunksPerRow, c = chunk % kChunksPerRow * 8;
    const bool valid = r < rows;
    sm80::cp_async_cg_16(smem + Tile::offset(r, c), src + (valid ? r : 0) * row_stride + c, valid);
  }
}

}  // namespace flashbuf
