// buffers: the K and V tiles of a block that streams its keys through a ring of shared-memory
// stages by cp.async, every thread of the block copying (decode's ring; its warps then read
// their slices of a stage through the K/V buffers, kv_buffer.cuh). Stage s holds the K tile
// and then the V tile of BlockN keys; every row is swizzled as those buffers read it (chunk c
// of row r at c ^ (r % 8), core's swizzled_chunk_offset), so the 8 rows an ldmatrix phase
// reads hit 8 distinct 16-byte bank groups, and so do a warp's copies (consecutive chunks of
// one row).
// A thread copies chunk load_chunk of kLoadPasses rows of each operand (core/tile_rows.hpp):
// rows load_row, load_row + kRowsPerPass, ..., or, from a paged cache whose pages hold whole
// runs of them, the run load_row * kLoadPasses, ... (one page entry and one address a tile);
// rows past the keys' end are zero-filled (a cache's unused rows may hold anything, NaN
// included, and 0 * NaN is NaN).
//
// Rows come from KVSource (kv_source.cuh): a contiguous source by a running pointer per pass
// (no per-row multiplies); a paged one through its page addressing, with the page-table entries
// of each tile copied into a ring of slots in shared memory a few tiles ahead (fetch_entries),
// so that no register waits for them when the tile's copies are issued: a page read into
// registers a tile ahead still stalled its warp, its load queued behind the tile copies
// (bench/NOTES-decode.md, "Measurements behind the code's choices").
//
// Tile describes the ring (decode's DecodeTile): kBlockN, kRowBytes, kChunksPerRow,
// kRowsPerPass, kLoadPasses, kTileBytes, kStageBytes, the two depths kStages and kDeepStages,
// and the entry slots of each (kEntrySlots, kDeepEntrySlots).
#pragma once

#include <cstdint>

#include "flashbuf/arch/sm80/cp_async.cuh"
#include "flashbuf/arch/sm80/ld_shared.cuh"
#include "flashbuf/buffers/kv_source.cuh"
#include "flashbuf/core/tile_rows.hpp"

namespace flashbuf {

template <class Elem, class Tile>
struct KVTileRing {
  static constexpr int kBN = Tile::kBlockN;
  static constexpr int kPasses = Tile::kLoadPasses;
  static constexpr int kRowsPerPass = Tile::kRowsPerPass;
  using Rows = TileRows<Tile::kRowBytes, kRowsPerPass, kPasses>;  // which rows a thread copies

  unsigned char* smem;        // stage 0's K tile
  std::int32_t* page_slots;   // paged: the entry slots, kBN entries each
  bool deep;                  // the ring is kDeepStages deep (else kStages)
  bool paged;
  KVSource<Elem> pool;          // paged: K's pool (V's pages are the same)
  const Elem* k_head;           // an address inside K (V) for zero-filled chunks
  const Elem* v_head;
  // Paged: this thread's chunk of a row at pool page 0, row 0, and the strides in bytes.
  const unsigned char* k_chunk;
  const unsigned char* v_chunk;
  std::uint32_t k_page_bytes, k_row_bytes, v_page_bytes, v_row_bytes;
  int load_row, load_chunk;
  int blk_lo = 0;               // the block's first key; tiles count from it
  // Paged, where the page size and the block's first key are multiples of kPasses: this
  // thread copies the consecutive rows of each tile (Rows::consecutive_row), which lie in one
  // page, so a tile takes one page entry and one address per operand instead of one a pass
  // (issue_prologue sets it, once blk_lo is final). Otherwise, and for contiguous sources,
  // the strided rows (Rows::strided_row).
  bool rows_in_one_page = false;
  // Contiguous: this thread's first row of tile 0, and the steps of a pass and of a tile
  // (set_first_rows, once blk_lo is final).
  const Elem* k_first = nullptr;
  const Elem* v_first = nullptr;
  std::int64_t k_pass_step = 0, v_pass_step = 0, k_tile_step = 0, v_tile_step = 0;

  __device__ unsigned char* k_stage(int stage) const { return smem + stage * Tile::kStageBytes; }
  __device__ unsigned char* v_stage(int stage) const { return k_stage(stage) + Tile::kTileBytes; }
  // Shared-memory destination of pass i: when a pass covers a multiple of 8 rows the XOR
  // term is the same in every pass and the offset is a constant step.
  __device__ int tile_dst(int i) const {
    return swizzled_chunk_offset(Rows::strided_row(load_row, i), load_chunk, Tile::kRowBytes);
  }
  // The entries of tile `tile` go to slot tile % (the slots of the ring's depth), by constants.
  __device__ int slot_of(int tile) const {
    return deep ? tile % Tile::kDeepEntrySlots : tile % Tile::kEntrySlots;
  }

  // Paged: the page-table entries of tile `tile` of [blk_lo, hi) (its first key's page
  // onwards, one per thread) into its slot, by cp.async in the caller's commit group.
  __device__ void fetch_entries(int tile, int hi) const {
    const int lo = blk_lo + tile * kBN;
    if (!paged || lo >= hi) return;
    const int first = pool.page_div.div(lo);
    const int count = pool.page_div.div(min(lo + kBN, hi) - 1) - first + 1;
    const int tid = threadIdx.x;
    if (tid < count) sm80::cp_async_ca_4(page_slots + slot_of(tile) * kBN + tid, pool.pages + first + tid);
  }
  // Contiguous: the sequence's K and V rows from its first (made by the caller here, so that
  // nothing of them stays live before the prologue).
  __device__ void set_first_rows(const KVSource<Elem>& k_seq, const KVSource<Elem>& v_seq) {
    k_first = k_seq.contiguous_row(blk_lo + load_row) + load_chunk * 8;
    v_first = v_seq.contiguous_row(blk_lo + load_row) + load_chunk * 8;
    k_pass_step = kRowsPerPass * k_seq.row_stride;
    v_pass_step = kRowsPerPass * v_seq.row_stride;
    k_tile_step = kBN * k_seq.row_stride;
    v_tile_step = kBN * v_seq.row_stride;
  }
  // Tile `tile` of [blk_lo, hi) into stage `stage`; rows at or past hi are zero-filled. Paged:
  // the tile's entries must be in their slot and visible (fetched in an earlier group, which
  // the caller waited for, then a barrier).
  __device__ void load_tile(int tile, int stage, int hi) const {
    if (blk_lo + tile * kBN >= hi) return;  // past the block's keys: nothing to read
    const int kb = blk_lo + tile * kBN + load_row;  // key of this thread's pass-0 row
    unsigned char* const sk = k_stage(stage);
    unsigned char* const sv = v_stage(stage);
    if (!paged) {
      const Elem* kp = k_first + tile * k_tile_step;
      const Elem* vp = v_first + tile * v_tile_step;
#pragma unroll
      for (int i = 0; i < kPasses; ++i) {
        const bool valid = kb + i * kRowsPerPass < hi;
        sm80::cp_async_cg_16(sk + tile_dst(i), valid ? kp : k_head, valid);
        sm80::cp_async_cg_16(sv + tile_dst(i), valid ? vp : v_head, valid);
        kp += k_pass_step;
        vp += v_pass_step;
      }
    } else if (rows_in_one_page) {
      // This thread's rows r0 .. r0 + kPasses - 1 share a page (Rows::run_in_page; a run past
      // the keys' end zero-fills from rows of the last key's page).
      const std::int32_t* const entries = page_slots + slot_of(tile) * kBN;
      const int t0 = blk_lo + tile * kBN;
      const int r0 = t0 + Rows::consecutive_row(load_row, 0);
      const auto run = Rows::run_in_page(r0, hi, pool.page_div);
      const unsigned page = pool.pool_page(static_cast<int>(entries[run.page_in_seq - pool.page_div.div(t0)]));
      const auto* k_row = static_cast<const unsigned char*>(KVSource<Elem>::paged_chunk(k_chunk, page, run.in_page, k_page_bytes, k_row_bytes));
      const auto* v_row = static_cast<const unsigned char*>(KVSource<Elem>::paged_chunk(v_chunk, page, run.in_page, v_page_bytes, v_row_bytes));
      const int rows = hi - r0;  // this thread's rows before the keys' end
      unsigned char* const sk0 = sk + Rows::consecutive_base(load_row);
      const int chunk0 = Rows::consecutive_chunk(load_row, load_chunk);
#pragma unroll
      for (int i = 0; i < kPasses; ++i) {
        const int dst = Rows::consecutive_offset(0, chunk0, i);
        sm80::cp_async_cg_16(sk0 + dst, k_row, i < rows);
        sm80::cp_async_cg_16(sk0 + Tile::kTileBytes + dst, v_row, i < rows);
        k_row += k_row_bytes;
        v_row += v_row_bytes;
      }
    } else {
      const std::int32_t* const entries = page_slots + slot_of(tile) * kBN;
      const int first = pool.page_div.div(blk_lo + tile * kBN);
      // Every pass's page entry is read before the first copy: the reads are volatile, so they
      // stay above the copies and their latencies overlap (read per pass, each copy waited on
      // its own shared-memory read: one chain per pass).
      unsigned pg[kPasses], in_page[kPasses];
#pragma unroll
      for (int i = 0; i < kPasses; ++i) {
        // Rows past the end read the last key's (a zero-fill, from an address inside the pool).
        const int jj = min(kb + i * kRowsPerPass, hi - 1);
        const int page_in_seq = pool.page_div.div(jj);
        in_page[i] = jj - page_in_seq * pool.page_size();
        pg[i] = sm80::ld_shared_ordered_u32(entries + page_in_seq - first);
      }
#pragma unroll
      for (int i = 0; i < kPasses; ++i) {
        const int j = kb + i * kRowsPerPass;
        // A bad index stays in bounds (KVSource::pool_page), the address by 32-bit multiply-adds.
        const unsigned page = pool.pool_page(static_cast<int>(pg[i]));
        sm80::cp_async_cg_16(sk + tile_dst(i), KVSource<Elem>::paged_chunk(k_chunk, page, in_page[i], k_page_bytes, k_row_bytes), j < hi);
        sm80::cp_async_cg_16(sv + tile_dst(i), KVSource<Elem>::paged_chunk(v_chunk, page, in_page[i], v_page_bytes, v_row_bytes), j < hi);
      }
    }
  }
  // The first S - 1 tiles of [blk_lo, hi) in flight (contiguous: from k_seq and v_seq), a
  // commit group each (the caller's open group, e.g. Q's copies, joins the first). Empty
  // groups keep the count uniform, so wait_group<S - 2> always means "tile t has landed". Paged: the entries of these tiles
  // first (one wait, before any K/V copy), then each group also carries the entries of the
  // tile S - 1 after its own.
  __device__ void issue_prologue(int stages, int hi, const KVSource<Elem>& k_seq, const KVSource<Elem>& v_seq) {
    set_first_rows(k_seq, v_seq);
    rows_in_one_page = paged && pool.page_size() % kPasses == 0 && blk_lo % kPasses == 0;
    if (paged) {
      for (int s = 0; s < stages - 1; ++s) fetch_entries(s, hi);
      sm80::cp_async_wait_all();
      __syncthreads();
    }
    for (int s = 0; s < stages - 1; ++s) {
      load_tile(s, s, hi);
      fetch_entries(s + stages - 1, hi);
      sm80::cp_async_commit_group();
    }
  }
  // Tile t (in stage t) was read before the keys' end was known, up to early_hi: zero its V
  // rows at or past hi (this thread's own copies, complete for it after its wait), so the
  // masked keys add 0, never NaN.
  __device__ void zero_v_rows_past(int t, int hi) const {
    unsigned char* const sv = v_stage(t);
    if (rows_in_one_page) {
      const int rows = hi - (blk_lo + t * kBN + Rows::consecutive_row(load_row, 0));
      const int base = Rows::consecutive_base(load_row), chunk0 = Rows::consecutive_chunk(load_row, load_chunk);
#pragma unroll
      for (int i = 0; i < kPasses; ++i) {
        if (i >= rows) *reinterpret_cast<uint4*>(sv + Rows::consecutive_offset(base, chunk0, i)) = make_uint4(0, 0, 0, 0);
      }
      return;
    }
    const int kb = blk_lo + t * kBN + load_row;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      if (kb + i * kRowsPerPass >= hi) *reinterpret_cast<uint4*>(sv + tile_dst(i)) = make_uint4(0, 0, 0, 0);
    }
  }
};

}  // namespace flashbuf
