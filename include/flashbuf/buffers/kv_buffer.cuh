// buffers: the K and V tile buffers (the seed's KVBufferImpl, KVBufferLDS,
// VBufferTransposeLoads and the KBuffer / KBufferLDS / VBuffer aliases).
//
//   device memory --(KVBufferImpl: ld.global.v4, num_stages register stages)--+
//                 --(KVBufferLDS: cp.async, no register staging)--------------+--> swizzled
//   shared tile (SwizzledTile, num_smem_stages) --(ldmatrix / ldmatrix.trans)--> MMA B fragments
//
// Which ldmatrix form reads the fragments follows from the config: K is stored keys x head
// dim, which is already the K-major ("col") B operand of S = Q K^T, so plain ldmatrix; V is
// stored keys x depth, the N-major B of O += P V, so ldmatrix.trans (VBufferTransposeLoads):
// V is transposed on its way into registers and P never leaves them.
//
// The seed's `token_gen` parameter is not a template flag here: the decode configuration
// (few query rows per KV head, the GQA group packed into the MMA's M, the keys split across
// blocks) is the kernel's tile table and plan (kernels/decode_config.cuh, core/split_kv.hpp),
// and nothing in a buffer's data movement depends on it.
//
// KVBufferImpl, the register-staged fill, is kept although no kernel takes it today: it is the
// seed's buffer, and the fill for elements that must pass through registers on their way to
// shared memory (its register stage is where a conversion would go, e.g. a quantised cache
// widened to 16 bits), and for a backend without an asynchronous copy engine. It models
// KVBuffer like the others, and tests/gpu/test_buffers_roundtrip.cu checks its fills
// bit-exactly (KBuffer with two register stages, VBuffer with one) in the GPU tests.
#pragma once

#include <cstdint>

#include "flashbuf/arch/sm80/cp_async.cuh"
#include "flashbuf/arch/sm80/ldmatrix.cuh"
#include "flashbuf/buffers/concepts.cuh"
#include "flashbuf/buffers/kv_config.cuh"
#include "flashbuf/buffers/kv_source.cuh"
#include "flashbuf/buffers/smem_tile.cuh"
#include "flashbuf/buffers/tensor_core.cuh"

namespace flashbuf {

namespace detail {

// Shared tile geometry and the fragment reads common to both fill strategies.
template <class Config, class TC, int NumThreads, int NumSmemStages>
struct KVSharedTiles {
  using In = typename TC::in_type;
  using Tile = SwizzledTile<Config::kRows, Config::kCols>;
  static constexpr bool kTransposedReads = Config::kIteratorAxis == IteratorAxis::keys;
  static_assert(TC::kTransposeB == kTransposedReads,
                "KV buffer: a keys x depth tile (V) is the N-major B of its product, a TiledTensorCore with "
                "TransposeB; a keys x head-dim tile (K) is K-major, without");
  static constexpr int kChunksPerThread = Config::kRows * Tile::kChunksPerRow / NumThreads;
  static_assert(Config::kRows * Tile::kChunksPerRow % NumThreads == 0,
                "KV buffer: the tile's 16-byte chunks must divide evenly among the threads");
  static constexpr int kNTiles = Config::kWarpTileN / TC::kN;  // n8 tiles per warp chunk
  static_assert(kNTiles % 2 == 0, "KV buffer: ldmatrix.x4 reads two n8 tiles at a time");
  static constexpr int kSmemBytes = Tile::kBytes * NumSmemStages;

  using Fragments = std::uint32_t[kNTiles][2];  // b0, b1 of each n8 tile

  In* smem = nullptr;
  int read_stage = 0;   // the stage load_from_shared reads
  int write_stage = 0;  // the stage load_from_dram fills next
  Fragments frag;

  __device__ In* stage_ptr(int stage) const { return smem + stage * Tile::kElems; }
  // The concept's stage choices, for a kernel whose pipeline orders the stages itself.
  __device__ void read_from_stage(int stage) { read_stage = stage; }
  __device__ void write_to_stage(int stage) { write_stage = stage; }

  // Thread t moves chunks t, t + NumThreads, ...: consecutive threads take consecutive
  // 16-byte chunks of a row, so each warp reads whole 128-byte lines. When the threads cover
  // whole rows per pass, pass i is pass 0 moved down by i * kRowsPerPass rows; if that is a
  // multiple of 8 the swizzle is the same too, so a chunk's shared offset is pass 0's plus a
  // constant: one live register, not one per chunk (those were spilled at D = 128).
  static constexpr bool kWholeRowPasses = NumThreads % Tile::kChunksPerRow == 0;
  static constexpr int kRowsPerPass = NumThreads / Tile::kChunksPerRow;
  static constexpr bool kSwizzleFixedPerPass = kWholeRowPasses && kRowsPerPass % Tile::kAtomRows == 0;

  __device__ static void chunk_coord(int i, int& row, int& col) {
    const int t = static_cast<int>(threadIdx.x);
    if constexpr (kWholeRowPasses) {
      row = t / Tile::kChunksPerRow + i * kRowsPerPass;
      col = t % Tile::kChunksPerRow * Tile::kChunkElems;
    } else {
      const int chunk = i * NumThreads + t;
      row = chunk / Tile::kChunksPerRow;
      col = chunk % Tile::kChunksPerRow * Tile::kChunkElems;
    }
  }
  // Shared offset of chunk i, which chunk_coord placed at (row, col).
  __device__ static int chunk_offset(int i, int row, int col) {
    if constexpr (kSwizzleFixedPerPass) {
      const int t = static_cast<int>(threadIdx.x);
      return Tile::offset(t / Tile::kChunksPerRow, col) + i * kRowsPerPass * Tile::kPitch;
    } else {
      return Tile::offset(row, col);
    }
  }

  // The concept's load_from_shared into a caller's fragment set: the B fragments of MMA k-step
  // KMma, warp-tile chunk `chunk`, into `dst` (a kernel that software-pipelines keeps two sets
  // and fills one while the MMAs read the other; the one-argument form fills `frag`).
  template <int KMma>
  __device__ void load_from_shared(int chunk, Fragments& dst) const {
    static_assert(KMma >= 0 && KMma < Config::kMmaKSteps, "load_from_shared: k-step out of range");
    const In* tile = stage_ptr(read_stage);
    const int lane = threadIdx.x % 32;
    const int n0 = Config::wtile_coord(chunk);
#pragma unroll
    for (int p = 0; p < kNTiles / 2; ++p) {
      std::uint32_t r[4];
      if constexpr (kTransposedReads) {
        // 16 keys x 16 depth columns: lane l -> key l%16, column 8*(l/16) (same map as A).
        const RowCol a = ldmatrix_x4::a_tile_row_address(lane);
        sm80::ldmatrix_x4_trans(r, tile + SwizzledCursor<Tile>(a.row, a.col).at(KMma * 16, n0 + p * 16));
      } else {
        const RowCol b = ldmatrix_x4::b_tile_row_address_nk(lane);
        sm80::ldmatrix_x4(r, tile + SwizzledCursor<Tile>(b.row, b.col).at(n0 + p * 16, KMma * 16));
      }
      dst[2 * p][0] = r[0];
      dst[2 * p][1] = r[1];
      dst[2 * p + 1][0] = r[2];
      dst[2 * p + 1][1] = r[3];
    }
  }
};

}  // namespace detail

// Device memory straight to shared memory (cp.async), no register staging. Rows at or past
// `rows_valid` are zero-filled: P is 0 there, and 0 * (unwritten memory) could be NaN.
// copy_to_shared is empty: the copy engine wrote the stage; the kernel waits on the cp.async
// group and synchronises, because group counts are shared by every buffer of a thread.
template <class Cfg, class TC, int NumThreads, int NumSmemStages = 1>
struct KVBufferLDS : detail::KVSharedTiles<Cfg, TC, NumThreads, NumSmemStages> {
  using Base = detail::KVSharedTiles<Cfg, TC, NumThreads, NumSmemStages>;
  using Config = Cfg;
  using TensorCore = TC;
  using In = typename TC::in_type;

  KVSource<In> src;

  // Contiguous sources are copied by 128-byte lines where the tile allows (smem_tile.cuh):
  // load_from_dram's path of its own for them.
  using Lines = LineCopies<typename Base::Tile, NumThreads>;
  static constexpr bool kContiguousPath = Lines::kApplies;

  __device__ void load_from_dram(int tile_row, int rows_valid) {
    In* tile = this->stage_ptr(this->write_stage);
    if (kContiguousPath && src.pages == nullptr) {
      // Contiguous rows by lines (LineCopies): a thread's chunks of a row share one 64-bit row
      // address and one row test, its passes step by a constant, and the shared offsets are
      // constants, where a 64-bit multiply-add of row and stride per chunk would make integer
      // work a large share of the kernel's instructions.
      // Rows past the end keep their own address, even past the allocation: with src-size 0
      // cp.async reads no byte of it (PTX ISA: src-size bytes are read, the rest zero-filled).
      // Rows of one line (D 64, 16-bit) take the tile's first row instead, a select a chunk: with
      // their own, ptxas spills more and D 64 runs slower (bench/NOTES-prefill.md, "Measurements
      // behind the code's choices").
      constexpr bool kSelectPastEnd = Lines::kLines == 1;
      const int t = static_cast<int>(threadIdx.x);
      const int row0 = Lines::first_row(t), col = Lines::first_col(t);
      In* const dst = tile + Base::Tile::offset(row0, col);
      const In* const first = src.row(tile_row) + col;
      const In* g = first + row0 * src.row_stride;
      const std::int64_t step = Lines::kRowsPerPass * src.row_stride;
#pragma unroll
      for (int pass = 0; pass < Lines::kPasses; ++pass, g += step) {
        const bool valid = row0 + pass * Lines::kRowsPerPass < rows_valid;
        const In* const row = kSelectPastEnd && !valid ? first : g;
#pragma unroll
        for (int line = 0; line < Lines::kLines; ++line) {
          sm80::cp_async_cg_16(dst + Lines::offset_step(pass, line), row + Lines::col_step(line), valid);
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < Base::kChunksPerThread; ++i) {
        int row, col;
        Base::chunk_coord(i, row, col);
        const bool valid = row < rows_valid;
        const In* g = src.row(tile_row + (valid ? row : 0)) + col;
        sm80::cp_async_cg_16(tile + Base::chunk_offset(i, row, col), g, valid);
      }
    }
    this->write_stage = (this->write_stage + 1) % NumSmemStages;
  }
  template <int Stage>
  __device__ void copy_to_shared() {}
  using Base::load_from_shared;
  template <int KMma>
  __device__ void load_from_shared(int chunk) {
    this->template load_from_shared<KMma>(chunk, this->frag);
  }
  __device__ auto& mma_tile() { return this->frag; }
};

// Device memory -> registers (NumStages deep) -> shared memory. The register stages let a
// kernel issue the global loads of tile i + NumStages - 1 before it stores tile i.
// load_from_dram pushes a tile into register stage 0 (older tiles move up);
// copy_to_shared<s> stores register stage s into the next shared stage.
template <class Cfg, class TC, int NumThreads, int NumStages = 1, int NumSmemStages = 1>
struct KVBufferImpl : detail::KVSharedTiles<Cfg, TC, NumThreads, NumSmemStages> {
  using Base = detail::KVSharedTiles<Cfg, TC, NumThreads, NumSmemStages>;
  using Config = Cfg;
  using TensorCore = TC;
  using In = typename TC::in_type;
  static_assert(NumStages >= 1, "KVBufferImpl: at least one register stage");

  KVSource<In> src;
  uint4 staged[NumStages][Base::kChunksPerThread];

  __device__ void load_from_dram(int tile_row, int rows_valid) {
#pragma unroll
    for (int s = NumStages - 1; s > 0; --s)
#pragma unroll
      for (int i = 0; i < Base::kChunksPerThread; ++i) staged[s][i] = staged[s - 1][i];
#pragma unroll
    for (int i = 0; i < Base::kChunksPerThread; ++i) {
      int row, col;
      Base::chunk_coord(i, row, col);
      staged[0][i] = row < rows_valid
                         ? __ldg(reinterpret_cast<const uint4*>(src.row(tile_row + row) + col))
                         : make_uint4(0, 0, 0, 0);
    }
  }
  template <int Stage>
  __device__ void copy_to_shared() {
    static_assert(Stage >= 0 && Stage < NumStages, "copy_to_shared: no such register stage");
    In* tile = this->stage_ptr(this->write_stage);
#pragma unroll
    for (int i = 0; i < Base::kChunksPerThread; ++i) {
      int row, col;
      Base::chunk_coord(i, row, col);
      *reinterpret_cast<uint4*>(tile + Base::chunk_offset(i, row, col)) = staged[Stage][i];
    }
    this->write_stage = (this->write_stage + 1) % NumSmemStages;
  }
  using Base::load_from_shared;
  template <int KMma>
  __device__ void load_from_shared(int chunk) {
    this->template load_from_shared<KMma>(chunk, this->frag);
  }
  __device__ auto& mma_tile() { return this->frag; }
};

// V read through ldmatrix.trans so that P stays in registers as the A operand. It states the
// P fragment order it consumes; PRegisterBuffer checks that it provides it.
template <class Cfg, class TC, int NumThreads, int NumSmemStages = 1>
struct VBufferTransposeLoads : KVBufferLDS<Cfg, TC, NumThreads, NumSmemStages> {
  static_assert(Cfg::kIteratorAxis == IteratorAxis::keys,
                "VBufferTransposeLoads: takes a VBufferConfig (keys x depth tile)");
  static constexpr PFragmentOrder kRequiredPOrder = PFragmentOrder::accumulator_as_a;
};

// The seed's aliases.
template <class TC, int BN, int WN, int BK, int NumThreads, int NumStages = 1>
using KBuffer = KVBufferImpl<KBufferConfig<BN, BK, WN>, TC, NumThreads, NumStages, 1>;
template <class TC, int BN, int WN, int BK, int Depth, int NumThreads, int NumStages = 1>
using VBuffer = KVBufferImpl<VBufferConfig<BN, BK, WN, Depth>, TC, NumThreads, NumStages, 1>;
template <class TC, int BN, int WN, int BK, int NumThreads, int NumSmemStages = 1>
using KBufferLDS = KVBufferLDS<KBufferConfig<BN, BK, WN>, TC, NumThreads, NumSmemStages>;

static_assert(KVBuffer<KBuffer<MmaSyncTensorCore<__nv_bfloat16>, 64, 64, 128, 128, 2>>);
static_assert(KVBuffer<VBuffer<MmaSyncTensorCore<__nv_bfloat16, true>, 64, 64, 64, 128, 128, 2>>);
static_assert(KVBuffer<KBufferLDS<MmaSyncTensorCore<__half>, 64, 64, 128, 128>>);
static_assert(KVBuffer<VBufferTransposeLoads<VBufferConfig<64, 64, 64, 128>,
                                             MmaSyncTensorCore<__nv_bfloat16, true>, 128>>);

}  // namespace flashbuf
