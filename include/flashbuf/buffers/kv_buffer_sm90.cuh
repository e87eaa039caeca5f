// buffers: the Hopper forms of KVBufferLDS and of the Q buffer. The tile goes from device
// memory straight into a slab-major 128-byte-swizzled tile, by one of two engines:
//   load_from_dram  cp.async, one row address per key: paged and varlen sources (a gather)
//   load_tile_tma   the bulk tensor copy engine, one box per 64-column slab, issued by one
//                   thread: batch-form K/V, where a tensor map describes the whole tensor
//   load_tile_tma_paged  the same over a page pool: boxes of a multiple of 8 rows inside a page
// "Loading from shared" builds the wgmma descriptor of one k16 step: the tensor core reads the
// operand itself.
//
//   K (KBufferConfig, K-major B of S = Q K^T):  start = slab(k) + (k % 4) * 32 B, SBO = 1024 B
//   V (VBufferConfig, N-major B of O += P V):   start = k * 16 rows * 128 B, LBO = slab bytes,
//                                                SBO = 1024 B, transpose bit set
#pragma once

#include <cstdint>

#include "flashbuf/arch/sm80/cp_async.cuh"
#include "flashbuf/arch/sm90/mbarrier.cuh"
#include "flashbuf/arch/sm90/tma.cuh"
#include "flashbuf/arch/sm90/wgmma.cuh"
#include "flashbuf/buffers/concepts.cuh"
#include "flashbuf/buffers/kv_config.cuh"
#include "flashbuf/buffers/kv_source.cuh"
#include "flashbuf/buffers/smem_tile_sm90.cuh"
#include "flashbuf/buffers/tensor_core_sm90.cuh"
#include "flashbuf/buffers/tile_copy.cuh"

namespace flashbuf {

namespace detail {
// Descriptor of a K-major operand stored as a SlabTile (rows = M or N) at `tile`, and the byte
// offset of its k16 step `k` from there (a compile-time constant: sm90::smem_desc_advance).
template <class Tile>
__device__ __forceinline__ std::uint64_t kmajor_desc(const void* tile) {
  return sm90::make_smem_desc(sm80::smem_u32(tile), 16, Tile::kAtomBytes, sm90::SmemSwizzle::b128);
}
template <class Tile, int K>
constexpr std::uint32_t kmajor_step_bytes() {
  return (K * 16 / Tile::kSlabCols) * Tile::kSlabBytes + (K * 16 % Tile::kSlabCols) * 2;
}
}  // namespace detail

// A whole slab tile (Tile::kRows rows from `row` of (head, batch)) by TMA into shared memory,
// a box of 64 columns x kRows rows per slab, completing on `full` (armed by the caller); rows
// and columns past the tensor arrive as zeros. Q's and the K/V stages' loads;
// store_slab_rows_tma below is its mirror.
template <class Tile, class T>
__device__ __forceinline__ void load_slab_tile_tma(T* tile, const CUtensorMap* map, int row, int head, int batch,
                                                   std::uint64_t* full) {
#pragma unroll
  for (int slab = 0; slab < Tile::kSlabs; ++slab) {
    sm90::cp_async_bulk_tensor_4d_g2s(tile + slab * Tile::kSlabElems, map, slab * Tile::kSlabCols, row, head, batch,
                                      full);
  }
}

template <class Cfg, class TC, int NumThreads, int NumSmemStages = 2>
struct KVBufferLDSSm90 {
  using Config = Cfg;
  using TensorCore = TC;
  using In = typename TC::in_type;
  using Tile = SlabTile<Cfg::kRows, Cfg::kCols>;
  static constexpr bool kNMajor = Cfg::kIteratorAxis == IteratorAxis::keys;
  static constexpr BMajor kMajor = kNMajor ? BMajor::n : BMajor::k;
  static_assert(TC::kBMajor == kMajor,
                "KVBufferLDSSm90: a keys x depth tile (V) is the N-major B of its product, a TiledTensorCore "
                "with TransposeB; a keys x head-dim tile (K) is K-major, without");
  static constexpr int kSmemBytes = Tile::kBytes * NumSmemStages;
  static_assert(Tile::kBytes % 1024 == 0, "KVBufferLDSSm90: stages must stay 1024-byte aligned");

  In* smem = nullptr;  // 1024-byte aligned
  KVSource<In> src;
  int write_stage = 0;  // the stage the next load fills
  int read_stage = 0;   // the stage load_from_shared reads
  std::uint64_t desc = 0;

  __device__ In* stage_ptr(int stage) const { return smem + stage * Tile::kElems; }
  // The concept's stage choices: the kernel's stage ring (StageRing) orders the stages.
  __device__ void read_from_stage(int stage) { read_stage = stage; }
  __device__ void write_to_stage(int stage) { write_stage = stage; }

  __device__ void load_from_dram(int tile_row, int rows_valid) {
    In* tile = stage_ptr(write_stage);
    if (src.pages == nullptr) {
      load_tile_async<Tile, NumThreads>(tile, src.row(tile_row), src.row_stride, rows_valid);
    } else {
      copy_tile_async<Tile, NumThreads>(tile, rows_valid, [&](int row, int col) {
        return src.template paged_rows<ChunkRuns<Tile, NumThreads>::kStepRows>(tile_row + row, col);
      });
    }
    write_stage = (write_stage + 1) % NumSmemStages;
  }
  // Rows [tile_row, tile_row + kRows) of (head, batch) through TMA, completing on `full` (which
  // the caller armed with Tile::kBytes); rows and columns past the tensor arrive as zeros.
  __device__ void load_tile_tma(const CUtensorMap* map, int tile_row, int head, int batch, std::uint64_t* full) {
    load_slab_tile_tma<Tile>(stage_ptr(write_stage), map, tile_row, head, batch, full);
    write_stage = (write_stage + 1) % NumSmemStages;
  }
  // Rows [key0, key0 + kRows) of a paged source through TMA (the map describes the pool: cols,
  // page rows, heads, pages; boxes of box_rows rows, a multiple of 8 dividing both the page and
  // the tile, so no box straddles pages), completing on `full` (armed by the caller). Every row
  // must be a key of the sequence (the caller gathers a tile that reaches past its end).
  //
  // A tile of a few large boxes (pages of 64 rows and more) is issued by one thread: one
  // division per tile (KVSource::paged_rows_within_pages), none per box, and its page-table
  // entries share a line, so all but the first read hit L1.
  __device__ void load_tile_tma_paged(const CUtensorMap* map, int key0, int head, std::uint64_t* full,
                                      int box_rows) {
    In* tile = stage_ptr(write_stage);
    auto box = src.paged_rows_within_pages(key0, box_rows);
    for (int r = 0; r < Tile::kRows; r += box_rows, box.next(true)) {
      const int page = box.page();
#pragma unroll
      for (int slab = 0; slab < Tile::kSlabs; ++slab) {
        sm90::cp_async_bulk_tensor_4d_g2s(tile + slab * Tile::kSlabElems + r * Tile::kSlabCols, map,
                                          slab * Tile::kSlabCols, box.in_page, head, page, full);
      }
    }
    write_stage = (write_stage + 1) % NumSmemStages;
  }
  // The same tile of many small boxes (pages of 16 or 32 rows) issued by `lanes` lanes (of a
  // warp or two), box j by lane j % lanes, each lane reading its own box's page-table entry, so
  // the reads overlap, and ptxas issues the lanes' copies in one loop over the active lanes (the
  // copy takes uniform registers) of about ten instructions a box: one thread walking 16 boxes
  // spent about 48 on each, behind a page-table read, on an SMSP whose consumer warps' softmax
  // is bound by issue (bench/NOTES-prefill.md, "Paged pages of 16 rows").
  __device__ void load_tile_tma_paged_by_lanes(const CUtensorMap* map, int key0, int head, std::uint64_t* full,
                                               int box_rows, int lane, int lanes) {
    In* tile = stage_ptr(write_stage);
    for (int j = lane; j / Tile::kSlabs * box_rows < Tile::kRows; j += lanes) {
      const int r = j / Tile::kSlabs * box_rows, slab = j % Tile::kSlabs;
      const auto box = src.paged_rows_within_pages(key0 + r, box_rows);
      sm90::cp_async_bulk_tensor_4d_g2s(tile + slab * Tile::kSlabElems + r * Tile::kSlabCols, map,
                                        slab * Tile::kSlabCols, box.in_page, head, box.page(), full);
    }
    write_stage = (write_stage + 1) % NumSmemStages;
  }
  // Nothing to do: the copy engine (cp.async or TMA) writes the stage itself, and the kernel
  // learns that it landed from the stage's full barrier (StageRing).
  template <int Stage>
  __device__ void copy_to_shared() {}
  template <int KMma>
  __device__ void load_from_shared(int /*chunk: wgmma covers the whole warp tile*/) {
    static_assert(KMma >= 0 && KMma < Cfg::kMmaKSteps, "load_from_shared: k-step out of range");
    // Stage 0's descriptor (the same every tile: hoisted), moved to the stage (once a tile:
    // shared by the k-steps), then by the k-step's constant.
    const std::uint64_t desc0 =
        kNMajor ? sm90::make_smem_desc(sm80::smem_u32(smem), Tile::kSlabBytes, Tile::kAtomBytes, sm90::SmemSwizzle::b128)
                : detail::kmajor_desc<Tile>(smem);
    const std::uint64_t stage_desc = sm90::smem_desc_advance(desc0, read_stage * Tile::kBytes);
    // K's k-steps (S = Q K^T) by the wide add, V's by the low word's (sm90::smem_desc_advance_wide).
    if constexpr (kNMajor) {
      desc = sm90::smem_desc_advance(stage_desc, KMma * 16 * Tile::kRowBytes);
    } else {
      desc = sm90::smem_desc_advance_wide(stage_desc, detail::kmajor_step_bytes<Tile, KMma>());
    }
  }
  __device__ std::uint64_t mma_tile() const { return desc; }
};

// Q for S = Q K^T on Hopper: in shared memory (wgmma's A from a descriptor); each warpgroup
// reads its own 64 rows.
template <class TC, int BM, int D>
struct QSharedBufferSm90 {
  using TensorCore = TC;
  using Tile = SlabTile<BM, D>;
  static constexpr int kRows = TC::kM;
  static constexpr int kCols = D;
  const typename TC::in_type* smem = nullptr;
  int first_row = 0;  // 64 * warpgroup
  template <int K>
  __device__ std::uint64_t mma_tile() const {
    const std::uint64_t rows_desc = sm90::smem_desc_advance(detail::kmajor_desc<Tile>(smem), first_row * Tile::kRowBytes);
    return sm90::smem_desc_advance(rows_desc, detail::kmajor_step_bytes<Tile, K>());
  }
  // The block's BM rows from `row` of a batch-form Q by TMA (boxes of 64 columns x BM rows, one
  // per slab; rows past the sequence arrive as zeros), completing on `full`, which this one
  // thread arms with the tile's bytes.
  __device__ static void load_tile_tma(typename TC::in_type* tile, const CUtensorMap* map, int row, int head,
                                       int batch, std::uint64_t* full) {
    sm90::mbarrier_arrive_expect_tx(full, Tile::kBytes);
    load_slab_tile_tma<Tile>(tile, map, row, head, batch, full);
  }
};

// The epilogue's mirror of load_slab_tile_tma: rows [first_row, first_row + Rows)
// of a staged slab tile (O, 16-bit) to device memory from `row` by TMA stores, a box of Rows x
// 64 columns per slab (the map clips rows past the sequence), the tile's column 0 going to
// column `col` of the tensor (a tile of some of its columns). One thread issues; it returns
// once the boxes have been read, so the shared memory may be reused or the block may exit. The
// writers' generic-proxy stores must be fenced to the async proxy and synchronised before.
template <class Tile, int Rows, class T>
__device__ __forceinline__ void store_slab_rows_tma(const T* tile, int first_row, const CUtensorMap* map, int row, int head,
                                    int batch, int col = 0) {
#pragma unroll
  for (int slab = 0; slab < Tile::kSlabs; ++slab) {
    sm90::cp_async_bulk_tensor_4d_s2g(map, col + slab * Tile::kSlabCols, row, head, batch,
                                      tile + slab * Tile::kSlabElems + first_row * Tile::kSlabCols);
  }
  sm90::cp_async_bulk_commit_group();
  sm90::cp_async_bulk_wait_group_read<0>();
}

static_assert(KVBuffer<KVBufferLDSSm90<KBufferConfig<128, 128, 128>, WgmmaTensorCore<__nv_bfloat16, 128>, 256>>);
static_assert(KVBuffer<KVBufferLDSSm90<VBufferConfig<128, 128, 128, 128>, WgmmaTensorCore<__half, 128, true>, 256>>);

}  // namespace flashbuf
