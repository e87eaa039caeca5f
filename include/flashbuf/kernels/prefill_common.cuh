// kernels: what the sm80 (mma.sync) and sm90 (wgmma) prefill kernels share — where a block's
// work lies (PrefillBlock), K/V source binding, the end of a block's rows (finalize_rows, over
// the online softmax of buffers/online_softmax.cuh), and the epilogue that writes O through
// shared memory. Row ownership: lane l holds rows l/4 ("lo") and l/4 + 8 ("hi") of each of
// its m16 tiles, columns 2*(l%4), +1 of each n8 tile.
#pragma once

#include <cstdint>
#include <utility>

#include "flashbuf/arch/sm80/cp_async.cuh"
#include "flashbuf/arch/sm80/fast_math.cuh"
#include "flashbuf/arch/sm90/stmatrix.cuh"
#include "flashbuf/buffers/kv_source.cuh"
#include "flashbuf/buffers/online_softmax.cuh"
#include "flashbuf/buffers/tile_copy.cuh"
#include "flashbuf/core/config.hpp"
#include "flashbuf/core/fragment.hpp"
#include "flashbuf/core/gqa_packing.hpp"
#include "flashbuf/core/mask.hpp"
#include "flashbuf/core/softmax_state.hpp"
#include "flashbuf/core/work_items.hpp"
#include "flashbuf/kernels/prefill_params.hpp"

namespace flashbuf {

// The (query block, head, sequence) a thread block computes, and what the mask lets it see.
// Blocks are launched heaviest first: under a causal mask the last query block sees most keys.
struct PrefillBlock {
  int m_block, head, batch, head_kv;
  int q_begin, seqlen_q, k_begin, seqlen_k;
  int m0, rows_q;
  int pack_shift;  // PrefillParams::pack_shift, or 0 where the kernel never packs (a constant there)
  MaskParams mask;
  KeyRange keys;

  // The grid's block (blockIdx: query block counted from the last, head, sequence; with
  // p.sections on, in sections: make_in_sections), or with an order table the item of rank
  // blockIdx.x / heads, head blockIdx.x % heads (heads: the grid's, K/V heads where the rows are
  // packed; past the table's count: an empty block). A kernel whose launches never pack
  // (MayPack false) holds the shift as the constant 0.
  template <bool MayPack = true>
  __device__ static PrefillBlock make(const PrefillParams& p, int block_m) {
    const int pack_shift = MayPack ? p.pack_shift : 0;
    if (p.item_order != nullptr) return make_ordered_item(p, block_m, static_cast<int>(blockIdx.x), pack_shift);
    if (p.sections.on()) return make_in_sections(p, block_m, pack_shift);
    return make_in_grid(p, block_m, pack_shift);
  }
  // The grid's block, for kernels launched without an order table: its coordinates then come
  // from blockIdx alone, which the compiler may re-read where make's (from memory or blockIdx)
  // must stay in registers across the main loop (the sm80 D 64 kernel, at 255 registers,
  // spilled its row sums in the loop for them: bench/NOTES-prefill.md).
  // (The mma.sync kernel's launcher never packs: pack_shift 0.)
  __device__ static PrefillBlock make_in_grid(const PrefillParams& p, int block_m, int pack_shift = 0) {
    return make_at(p, block_m, p.num_m_blocks - 1 - static_cast<int>(blockIdx.x), blockIdx.y, blockIdx.z, pack_shift);
  }
  // The grid's block in the sections' order (p.sections). Not in make_in_grid: its arithmetic
  // costs the mma.sync kernel, at 255 registers, spills.
  __device__ static PrefillBlock make_in_sections(const PrefillParams& p, int block_m, int pack_shift) {
    const int block = static_cast<int>(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
    const GridItem item = p.sections.item(block);
    const int batch = p.sections.heads.div(item.pair);
    return make_at(p, block_m, p.num_m_blocks - 1 - item.m_from_last, item.pair - batch * p.sections.heads.divisor,
                   batch, pack_shift);
  }
  __device__ static PrefillBlock none() {
    PrefillBlock b{};
    b.m0 = 0;
    b.seqlen_q = 0;  // empty()
    return b;
  }
  // Work item `item` of a persistent grid, in the walk's numbering (item_coords over the grid's
  // heads: K/V heads where the rows are packed; batch-form launches never pack).
  __device__ static PrefillBlock make_item(const PrefillParams& p, int block_m, int item, int pack_shift = 0) {
    const ItemCoords c = item_coords(item, p.num_m_blocks, p.heads_q >> pack_shift);
    return make_at(p, block_m, p.num_m_blocks - 1 - c.m_from_last, c.head, c.batch, pack_shift);
  }
  // Item `item` of an order table (a varlen batch: make()'s blocks, or a persistent grid's walk):
  // the item of rank item / heads and head item % heads (heads: the grid's; past the table's
  // count: an empty block).
  __device__ static PrefillBlock make_ordered_item(const PrefillParams& p, int block_m, int item, int pack_shift) {
    const int heads = p.heads_q >> pack_shift;
    const int rank = item / heads;
    const int head = item - rank * heads;
    if (rank >= p.item_order[0]) return none();
    return make_at(p, block_m, p.item_order[2 + 2 * rank], head, p.item_order[1 + 2 * rank], pack_shift);
  }
  // `head` counts the grid's heads: query heads, or K/V heads where the rows are packed
  // (pack_shift > 0: then b.head is the group's first query head, and rows, m0 and the mask
  // count packed rows).
  __device__ static PrefillBlock make_at(const PrefillParams& p, int block_m, int m_block, int head, int batch,
                                         int pack_shift) {
    PrefillBlock b;
    b.m_block = m_block;
    b.pack_shift = pack_shift;
    b.head = head << pack_shift;
    b.batch = batch;
    b.head_kv = b.head / p.group;
    // Offsets and lengths in device memory are unchecked unless the caller asked: each is
    // clamped to the rows its tensor holds (one unsigned min takes negatives too), so a bad
    // entry gives wrong rows, never an access outside q, k, v, o or lse.
    b.q_begin = p.cu_seqlens_q ? clamp_index(p.cu_seqlens_q[b.batch], p.total_q) : 0;
    b.seqlen_q = (p.cu_seqlens_q ? max(clamp_index(p.cu_seqlens_q[b.batch + 1], p.total_q) - b.q_begin, 0) : p.seqlen_q)
                 << pack_shift;
    b.k_begin = p.cu_seqlens_k ? clamp_index(p.cu_seqlens_k[b.batch], p.total_k) : 0;
    b.seqlen_k = p.cu_seqlens_k ? max(clamp_index(p.cu_seqlens_k[b.batch + 1], p.total_k) - b.k_begin, 0)
                                : (p.seqlens_k ? clamp_index(p.seqlens_k[b.batch], p.seqlen_k) : p.seqlen_k);
    b.m0 = b.m_block * block_m;
    b.rows_q = min(block_m, b.seqlen_q - b.m0);
    b.mask = MaskParams{b.seqlen_q, b.seqlen_k, p.window_left, p.window_right, pack_shift};
    b.keys = key_range(b.mask, b.m0, b.m0 + block_m);
    return b;
  }
  // seqlen_q counts query rows: tokens, or packed rows (tokens << pack_shift).
  __device__ bool empty() const { return m0 >= seqlen_q; }
  // x in [0, bound]; a negative x becomes bound.
  __device__ static int clamp_index(int x, int bound) {
    return static_cast<int>(min(static_cast<unsigned>(x), static_cast<unsigned>(bound)));
  }

  // Row 0 of the block (m0 is a multiple of the group where rows are packed: its head is the
  // group's first).
  template <class In>
  __device__ const In* q_ptr(const PrefillParams& p) const {
    return static_cast<const In*>(p.q) + batch * p.q_batch_stride +
           std::int64_t(q_begin + (m0 >> pack_shift)) * p.q_row_stride + head * p.q_head_stride;
  }
  template <class In>
  __device__ In* o_ptr(const PrefillParams& p) const {
    return static_cast<In*>(p.o) + batch * p.o_batch_stride +
           std::int64_t(q_begin + (m0 >> pack_shift)) * p.o_row_stride + head * p.o_head_stride;
  }
  // Binds both K/V buffers to this sequence's rows (contiguous, varlen or paged).
  template <class In, bool Paged, class KBuf, class VBuf>
  __device__ void bind_kv(KBuf& kbuf, VBuf& vbuf, const PrefillParams& p) const {
    kbuf.src = kv_source<In, Paged>(p, p.k, p.k_batch_stride, p.k_row_stride, p.k_head_stride);
    vbuf.src = kv_source<In, Paged>(p, p.v, p.v_batch_stride, p.v_row_stride, p.v_head_stride);
  }
  // Where K (or V) rows of this sequence and KV head come from.
  template <class In, bool Paged>
  __device__ KVSource<In> kv_source(const PrefillParams& p, const void* base, std::int64_t batch_stride,
                                    std::int64_t row_stride, std::int64_t head_stride) const {
    KVSource<In> src;
    const In* b = static_cast<const In*>(base) + head_kv * head_stride;
    src.row_stride = row_stride;
    if constexpr (Paged) {
      src.base = b;
      src.pages = p.page_table + batch * p.page_table_stride;
      src.page_stride = batch_stride;
      src.page_div = p.page_div;
      src.num_pages = p.num_pages;
    } else {
      src.base = b + batch * batch_stride + std::int64_t(k_begin) * row_stride;
    }
    return src;
  }
};

// This lane's row (mt, h) counted in the block's sequence (packed: token r >> pack_shift of
// head head_of_row(r)); row_in_block0 is the first block row of the warp's tiles.
__device__ __forceinline__ int sequence_row(const PrefillBlock& b, int row_in_block0, int mt, int h) {
  return b.m0 + row_in_block0 + mt * 16 + h * 8 + static_cast<int>(threadIdx.x % 32) / 4;
}
// The query head of sequence row r: the block's, or where rows are packed, the group's r-th.
__device__ __forceinline__ int head_of_row(const PrefillBlock& b, int r) { return b.head + packed_head(r, b.pack_shift); }

// One lane of each quad writes row (mt, h)'s LSE if the row is one of the sequence's.
__device__ __forceinline__ void store_lse(const PrefillParams& p, const PrefillBlock& b, int row_in_block0, int mt,
                                          int h, float lse) {
  const int r = sequence_row(b, row_in_block0, mt, h);
  if (threadIdx.x % 4 == 0 && r < b.seqlen_q) {
    p.lse[b.batch * p.lse_batch_stride + head_of_row(b, r) * p.lse_head_stride + b.q_begin + (r >> b.pack_shift)] = lse;
  }
}

// The end of a block's rows, from the online softmax's state: divides the output by the row
// sums (0 for rows with no key) and writes the natural-log LSE of the block's valid rows;
// row_in_block0 is the first block row of this warp's tiles.
// With sinks, the row's head's sink joins each row here, once, after all
// its keys: one more term in the denominator (sink_weight_log2, one exponential in the row's
// own scale) and the LSE with the sink (apply_sink, only where the LSE is stored); a block
// without sinks takes the first branch, once, and does what it did before sinks existed.
// The NaN rule: a row that read a NaN anywhere gets NaN in every O element and NaN LSE. A NaN
// query or key already makes the row sum NaN; a NaN value reaches only O's columns, so a
// thread whose elements of a row hold a NaN makes its partial sum NaN before the quad sum,
// which then carries it to the row's four lanes (the wgmma accumulator's rows lie in quads
// as the m16n8k16 fragment's do), and the division and row_lse spread it. (A sink cannot
// hide it: apply_sink keeps a NaN LSE NaN.)
template <int MTiles, int NTiles, int MaxSlackLog2, class PIn, class OBuf>
__device__ __forceinline__ void finalize_rows(OnlineSoftmax<MTiles, NTiles, MaxSlackLog2, PIn>& softmax, OBuf& out, const PrefillParams& p,
                                              const PrefillBlock& b, int row_in_block0) {
  float sink[MTiles][2] = {};  // each row's head's (packed rows: heads differ)
  if (p.sinks != nullptr) {    // first: their latency under the shuffles
#pragma unroll
    for (int mt = 0; mt < MTiles; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) sink[mt][h] = p.sinks[head_of_row(b, sequence_row(b, row_in_block0, mt, h))];
  }
  auto& row_sum = softmax.row_sum;
  const auto& row_max_log2 = softmax.row_max_log2;
  using Softmax = OnlineSoftmax<MTiles, NTiles, MaxSlackLog2, PIn>;
  float o_sum[MTiles][2];  // O's denominators (Softmax::o_denominator); the LSE takes row_sum
#pragma unroll
  for (int mt = 0; mt < MTiles; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (out.holds_nan(mt, h)) row_sum[mt][h] = __int_as_float(0x7fffffff);
      if constexpr (MaxSlackLog2 > 0) o_sum[mt][h] = quad_sum(softmax.o_denominator(mt, h));
      row_sum[mt][h] = quad_sum(row_sum[mt][h]);
      if constexpr (MaxSlackLog2 == 0) o_sum[mt][h] = row_sum[mt][h];
    }
  if (p.sinks == nullptr) {
#pragma unroll
    for (int mt = 0; mt < MTiles; ++mt) {
      out.apply_softmax_denominator(mt, o_sum[mt][0], o_sum[mt][1]);
      if (p.lse != nullptr) {
#pragma unroll
        for (int h = 0; h < 2; ++h) store_lse(p, b, row_in_block0, mt, h, Softmax::row_lse(row_max_log2[mt][h], row_sum[mt][h]));
      }
    }
  } else {
#pragma unroll
    for (int mt = 0; mt < MTiles; ++mt) {
      float denominator[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) denominator[h] = o_sum[mt][h] + sink_weight_log2(sink[mt][h], row_max_log2[mt][h]);
      out.apply_softmax_denominator(mt, denominator[0], denominator[1]);
      if (p.lse != nullptr) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float lse;
          apply_sink(Softmax::row_lse(row_max_log2[mt][h], row_sum[mt][h]), sink[mt][h], lse);
          store_lse(p, b, row_in_block0, mt, h, lse);
        }
      }
    }
  }
}

// The epilogue: O fragments (rows from row_in_block0) -> shared tile OTile (16-bit, converted
// with TC::pack) -> whole 16-byte chunks of rows in device memory (store_output: the two
// steps below with `sync` between them). On sm_90 stmatrix writes four 8x8 matrices per
// instruction (the accumulator's fragment is stmatrix's; per-element stores with their swizzle
// arithmetic made the epilogue a large share of the stalls: bench/NOTES-prefill.md, "Measurements
// behind the code's choices").
template <class OTile, class TC, int MTiles, int OTiles, class In>
__device__ __forceinline__ void stage_output(const float (&o)[MTiles][OTiles][4], In* smem, int row_in_block0,
                                             int lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  static_assert(OTiles % 2 == 0, "stmatrix.x4 takes two 8-column tiles of both 8-row halves");
  // Lane l addresses row l % 8 of matrix l / 8: matrices (rows 0-7 | 8-15) x (tile nt | nt+1).
  const int m_row = (lane / 8 % 2) * 8 + lane % 8;
  const int m_col = lane / 16 * 8;
#pragma unroll
  for (int mt = 0; mt < MTiles; ++mt) {
    const int r = row_in_block0 + mt * 16 + m_row;
#pragma unroll
    for (int nt = 0; nt < OTiles; nt += 2) {
      sm90::stmatrix_x4(smem + OTile::offset(r, nt * 8 + m_col), TC::pack(o[mt][nt][0], o[mt][nt][1]),
                        TC::pack(o[mt][nt][2], o[mt][nt][3]), TC::pack(o[mt][nt + 1][0], o[mt][nt + 1][1]),
                        TC::pack(o[mt][nt + 1][2], o[mt][nt + 1][3]));
    }
  }
#else
#pragma unroll
  for (int mt = 0; mt < MTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < OTiles; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = row_in_block0 + mt * 16 + h * 8 + lane / 4;
        const int c = nt * 8 + (lane % 4) * 2;
        *reinterpret_cast<std::uint32_t*>(smem + OTile::offset(r, c)) = TC::pack(o[mt][nt][2 * h], o[mt][nt][2 * h + 1]);
      }
#endif
}

// NumThreads threads (this one is `thread`) copy CopyRows rows of the staged tile from
// copy_row0 to dst (row copy_row0 at dst + copy_row0 * row_stride); rows >= `rows` are not
// written. Unrolled with one (row, chunk) base per thread where every pass covers whole rows.
template <class OTile, int NumThreads, int CopyRows = OTile::kRows, class In>
__device__ __forceinline__ void copy_output(const In* smem, In* dst, std::int64_t row_stride, int rows, int thread,
                                            int copy_row0 = 0) {
  constexpr int kChunksPerRow = OTile::kCols / 8;
  if constexpr (NumThreads % kChunksPerRow == 0) {
    constexpr int kRowsPerPass = NumThreads / kChunksPerRow;
    static_assert(CopyRows % kRowsPerPass == 0, "epilogue copy: whole passes");
    const int r0 = copy_row0 + thread / kChunksPerRow, c = thread % kChunksPerRow * 8;
    In* out = dst + r0 * row_stride + c;
#pragma unroll
    for (int i = 0; i < CopyRows / kRowsPerPass; ++i) {
      const int r = r0 + i * kRowsPerPass;
      if (r < rows) *reinterpret_cast<uint4*>(out) = *reinterpret_cast<const uint4*>(smem + OTile::offset(r, c));
      out += kRowsPerPass * row_stride;
    }
  } else {
    for (int chunk = thread; chunk < CopyRows * kChunksPerRow; chunk += NumThreads) {
      const int r = copy_row0 + chunk / kChunksPerRow, c = chunk % kChunksPerRow * 8;
      if (r < rows)
        *reinterpret_cast<uint4*>(dst + r * row_stride + c) = *reinterpret_cast<const uint4*>(smem + OTile::offset(r, c));
    }
  }
}

// The same for a packed GQA tile (PrefillParams::pack_shift = shift): row r goes to token
// r >> shift (row_stride apart) of head r & (2^shift - 1) (head_stride apart) from dst.
template <class OTile, int NumThreads, int CopyRows = OTile::kRows, class In>
__device__ __forceinline__ void copy_output_packed(const In* smem, In* dst, std::int64_t row_stride,
                                                   std::int64_t head_stride, int shift, int rows, int thread,
                                                   int copy_row0 = 0) {
  constexpr int kChunksPerRow = OTile::kCols / 8;
  for (int chunk = thread; chunk < CopyRows * kChunksPerRow; chunk += NumThreads) {
    const int r = copy_row0 + chunk / kChunksPerRow, c = chunk % kChunksPerRow * 8;
    if (r < rows) {
      In* out = dst + packed_row_offset(r, shift, row_stride, head_stride) + c;
      *reinterpret_cast<uint4*>(out) = *reinterpret_cast<const uint4*>(smem + OTile::offset(r, c));
    }
  }
}

// The caller synchronises before (the shared region must be free); `sync` synchronises the
// NumThreads writers in between.
template <class OTile, class TC, int NumThreads, int CopyRows = OTile::kRows, int MTiles, int OTiles, class In,
          class Sync>
__device__ void store_output(const float (&o)[MTiles][OTiles][4], In* smem, int row_in_block0, In* dst,
                             std::int64_t row_stride, int rows, int thread, Sync&& sync, int copy_row0 = 0) {
  stage_output<OTile, TC>(o, smem, row_in_block0, thread % 32);
  sync();
  copy_output<OTile, NumThreads, CopyRows>(smem, dst, row_stride, rows, thread, copy_row0);
}
// The same, to a packed GQA tile's rows (copy_output_packed).
template <class OTile, class TC, int NumThreads, int CopyRows = OTile::kRows, int MTiles, int OTiles, class In,
          class Sync>
__device__ void store_output_packed(const float (&o)[MTiles][OTiles][4], In* smem, int row_in_block0, In* dst,
                                    std::int64_t row_stride, std::int64_t head_stride, int shift, int rows, int thread,
                                    Sync&& sync, int copy_row0 = 0) {
  stage_output<OTile, TC>(o, smem, row_in_block0, thread % 32);
  sync();
  copy_output_packed<OTile, NumThreads, CopyRows>(smem, dst, row_stride, head_stride, shift, rows, thread, copy_row0);
}
// Every thread of the block writes.
template <class OTile, class TC, int NumThreads, int MTiles, int OTiles, class In>
__device__ void store_output(const float (&o)[MTiles][OTiles][4], In* smem, int row_in_block0, In* dst,
                             std::int64_t row_stride, int rows) {
  store_output<OTile, TC, NumThreads>(o, smem, row_in_block0, dst, row_stride, rows, static_cast<int>(threadIdx.x),
                                      [] { __syncthreads(); });
}

}  // namespace flashbuf
