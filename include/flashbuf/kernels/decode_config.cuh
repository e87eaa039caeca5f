// Kernels layer, decode: the tile table of the split-KV decode kernel and the plan arithmetic
// the kernel and its host plan share (workspace layout, keys per split; the host's choice of
// the split count is core/split_kv.hpp). Plain constexpr C++ with no CUDA headers, so
// the plan, the launcher and the tests share one definition.
//
// Work decomposition (one CUDA block per (split, kv-head x row-chunk, sequence)):
//
//   packed query rows of one (sequence, kv head):  row = token * group + g,  g < Hq / Hkv
//   rows are cut into chunks of kRows = 16 * MTiles (<= 128); a chunk is one block's M.
//
//   block (MTiles = 1, 4 warps)               block (MTiles = 4, 4 warps)
//   key tile of kBlockN = 64 keys             key tile of kBlockN = 64 keys
//   +--------+--------+--------+--------+     +----------------------------------+
//   | warp 0 | warp 1 | warp 2 | warp 3 |     | warp 0: rows  0..15, all 64 keys |
//   | keys   | keys   | keys   | keys   |     | warp 1: rows 16..31, all 64 keys |
//   |  0..15 | 16..31 | 32..47 | 48..63 |     | warp 2: rows 32..47              |
//   | rows 0..15 (the whole GQA group)  |     | warp 3: rows 48..63              |
//   +--------+--------+--------+--------+     +----------------------------------+
//   each warp keeps its own softmax state and O (16 x D fp32); the kWarpsN warps sharing
//   rows are merged once, in shared memory, after the last tile.
#pragma once

#include <cstddef>
#include <cstdint>

#include "flashbuf/core/config.hpp"
#include "flashbuf/core/fast_divmod.hpp"
#include "flashbuf/core/split_kv.hpp"

namespace flashbuf::kernels::decode {

// The row tiles a block may hold: 16 rows per tile, one tile per warp.
inline constexpr int kMaxMTiles = 8;
inline constexpr int kMaxRowsPerBlock = 16 * kMaxMTiles;  // longer groups are cut in chunks
// Shared memory one block may ask for (H100/H200: 227 KB opt-in per block).
inline constexpr int kMaxSmemBytes = 227 * 1024;
inline constexpr int kMaxSmemBytesDeep = 220 * 1024;  // the deep ring's budget (some slack)
inline constexpr int kMaxDeepStages = 6;  // the deep ring's depth at most

// Paged caches: a ring of `stages` keeps the page-table entries of 2 * stages tiles (<= block_n
// pages a tile, at page size 1), copied stages - 1 tiles ahead with the K/V copies.
FLASHBUF_HOST_DEVICE constexpr int page_entry_slots(int stages) { return 2 * stages; }
FLASHBUF_HOST_DEVICE constexpr int page_entry_bytes(int stages, int block_n) {
  return page_entry_slots(stages) * block_n * 4;
}

// 16-row tiles needed for `rows` packed rows, rounded up to a power of two so only four
// shapes are instantiated (1, 2, 4, 8).
FLASHBUF_HOST_DEVICE constexpr int mtiles_for_rows(int rows) {
  const int need = ceil_div(rows < kMaxRowsPerBlock ? (rows < 1 ? 1 : rows) : kMaxRowsPerBlock, 16);
  int m = 1;
  while (m < need) m *= 2;
  return m;
}

template <int HeadDim, int MTiles>
struct DecodeTile {
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kMTiles = MTiles;
  static constexpr int kRows = 16 * MTiles;  // packed query rows per block (MMA M)
  // One 16-row tile per warp; with few rows the warps split each key tile instead
  // (4 warps keep 2-3 blocks per SM issuing loads while one block waits at its barrier).
  static constexpr int kWarpsM = MTiles;
  static constexpr int kWarpsN = MTiles >= 4 ? 1 : 4 / MTiles;
  static constexpr int kWarps = kWarpsM * kWarpsN;
  static constexpr int kThreads = 32 * kWarps;
  // Keys each warp takes from a tile. 64 per block tile: 32 KB of K+V per stage at D = 128,
  // enough bytes per barrier. At D = 256 a warp takes 16 keys (one k16 step of P.V), so the
  // 16x256 fp32 O (128 registers) plus the scores fit unspilled; the block tile is then
  // 64 keys with 4 warps on one row tile, fewer with more row tiles (compute-bound anyway).
  static constexpr int kKeysPerWarp = HeadDim == 256 ? 16 : 64 / kWarpsN;
  static constexpr int kBlockN = kKeysPerWarp * kWarpsN;
  static constexpr int kElemBytes = 2;  // bf16 / fp16
  static constexpr int kRowBytes = HeadDim * kElemBytes;
  static constexpr int kChunksPerRow = kRowBytes / 16;  // 16-byte cp.async / ldmatrix rows
  static constexpr int kTileBytes = kBlockN * kRowBytes;  // one K (or V) tile
  static constexpr int kStageBytes = 2 * kTileBytes;      // K and V of one tile
  // Stages in flight: about 64-100 KB per block, so 2-3 blocks per SM keep >= 100 KB of
  // reads outstanding per SM (the read ceiling needs ~40 KB at ~1 us latency).
  static constexpr int kStages = kStageBytes <= 16 * 1024 ? 4 : 3;
  // A paged grid of at most one block per SM runs a deeper ring, chosen at launch
  // (DecodeParams::deep_ring; choose_deep_ring says when): the SM's shared memory is its
  // block's alone, and a split of 4 tiles then has all of them (and their page entries) in
  // flight at once. As many stages as fit, at most 6.
  static constexpr int kQBytes = kRows * kRowBytes;
  // The cluster merge at one row tile pushes (decode_epilogue.cuh): each block stores every
  // piece of its part (a row's 8 channels, fp32, and the row's LSE) into the shared memory of
  // the block that merges that piece, which learns from an mbarrier of its own that all have
  // landed. A peer may push while this block still streams its keys, so the landing slots lie
  // past everything else (the ring, Q, the page entries, the epilogue). Piece i of the P =
  // kRows * D / 8 goes to block i % n as slot (i / n) * n + split: at most P + n - 1 slots.
  // More row tiles pull their peers' parts after a cluster barrier instead: their landing
  // would cost blocks per SM.
  static constexpr bool kPushMerge = MTiles == 1;
  static constexpr int kLandingSlots = kPushMerge ? kRows * (HeadDim / 8) + ::flashbuf::split_kv::kMaxClusterSplits - 1 : 0;
  static constexpr int kLandingBarrierBytes = 16;  // the mbarrier, padded so the slots stay 16-byte aligned
  static constexpr int kLandingBytes = kPushMerge ? round_up(kLandingBarrierBytes + kLandingSlots * (8 + 1) * 4, 16) : 0;
  static constexpr int kDeepStagesFit =
      (kMaxSmemBytesDeep - kQBytes - page_entry_bytes(kMaxDeepStages, kBlockN) - kLandingBytes) / kStageBytes;
  static constexpr int kDeepStages =
      kDeepStagesFit > kMaxDeepStages ? kMaxDeepStages : (kDeepStagesFit < kStages ? kStages : kDeepStagesFit);
  // Q stays in registers (D/16 x 4 words per warp) up to D = 128; at D = 256 the O
  // accumulators take 128 registers, so Q fragments are re-read from shared memory.
  static constexpr bool kQInRegisters = HeadDim <= 128;
  // Epilogue: every warp's O (fp32, rows padded by 8 floats against bank conflicts) and its
  // (max, sum) per row, aliased over the pipeline buffers once the last tile is consumed;
  // then the block's LSE per row (the pull cluster merge reads it, with the block's normalised
  // O written over warp 0's O).
  static constexpr int kOPad = 8;
  static constexpr int kEpilogueOBytes = kWarpsN * kRows * (HeadDim + kOPad) * 4;
  static constexpr int kEpilogueBytes = kEpilogueOBytes + kWarpsN * kRows * 2 * 4 + kRows * 4;
  // Layout for a ring of `stages`: the ring, Q, then (paged caches) the page-table entries
  // (page_entry_bytes). The epilogue reuses all of it from the start. Then the push merge's
  // landing (its mbarrier, the slots' O, their LSEs), which nothing else reuses.
  static constexpr int q_offset(int stages) { return stages * kStageBytes; }
  static constexpr int landing_offset(int stages) {
    const int main = q_offset(stages) + kQBytes + page_entry_bytes(stages, kBlockN);
    return round_up(main > kEpilogueBytes ? main : kEpilogueBytes, 16);
  }
  static constexpr int smem_bytes(int stages) { return landing_offset(stages) + kLandingBytes; }
  static constexpr int kSmemBytes = smem_bytes(kStages);
  static constexpr int kDeepSmemBytes = smem_bytes(kDeepStages);
  // Tile loads: threads cover a tile row by row, kChunksPerRow threads per key row.
  static constexpr int kRowsPerPass = kThreads / kChunksPerRow;
  static constexpr int kLoadPasses = kBlockN / kRowsPerPass;
  // Paged: the page-entry slots of each depth (buffers/kv_tile_ring.cuh).
  static constexpr int kEntrySlots = page_entry_slots(kStages);
  static constexpr int kDeepEntrySlots = page_entry_slots(kDeepStages);
};

template <int HeadDim, int MTiles>
consteval bool check_decode_tile() {
  using T = DecodeTile<HeadDim, MTiles>;
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "decode head dims: 64, 128, 256");
  static_assert(MTiles == 1 || MTiles == 2 || MTiles == 4 || MTiles == 8, "MTiles: 1, 2, 4 or 8");
  static_assert(T::kKeysPerWarp % 16 == 0, "a warp's keys must fill whole k16 steps of P.V");
  static_assert(T::kThreads % T::kChunksPerRow == 0, "tile loads: whole rows per pass");
  static_assert(T::kBlockN % T::kRowsPerPass == 0, "tile loads: whole passes per tile");
  static_assert(T::kChunksPerRow % 8 == 0 || T::kChunksPerRow == 8,
                "the XOR swizzle permutes 8 chunks of 16 bytes: rows of >= 128 bytes");
  static_assert((T::kRows * T::kChunksPerRow) % T::kThreads == 0, "Q loads: whole passes");
  static_assert(T::kBlockN <= T::kThreads, "page-table entries: one thread copies each of a tile's");
  static_assert(T::kSmemBytes <= kMaxSmemBytes, "decode tile exceeds the shared memory of a block");
  static_assert(T::kDeepSmemBytes <= kMaxSmemBytes, "the deep ring exceeds the shared memory of a block");
  static_assert(T::kDeepStages >= T::kStages, "the deep ring is at least as deep as the shared one");
  return true;
}

// The workspace (workspace merge only; the cluster merge needs none): partial O of every
// split, then their LSEs (natural log), laid out as the public merge_states parts so the
// combine is merge_states itself:
//   o_parts   fp32 (num_splits, batch * q_per_seq, heads_q, head_dim_v)
//   lse_parts fp32 (num_splits, batch * q_per_seq, heads_q), starting 256-byte aligned.
inline constexpr std::size_t kWorkspaceAlignment = 256;

struct WorkspaceLayout {
  std::size_t o_parts_offset = 0;
  std::size_t lse_parts_offset = 0;
  std::size_t bytes = 0;
};

constexpr WorkspaceLayout workspace_layout(int num_splits, int batch, int q_per_seq, int heads_q,
                                           int head_dim_v) {
  WorkspaceLayout w;
  if (num_splits <= 1) return w;
  const std::size_t rows = std::size_t(num_splits) * std::size_t(batch) * std::size_t(q_per_seq) *
                           std::size_t(heads_q);
  const std::size_t o_bytes = rows * std::size_t(head_dim_v) * sizeof(float);
  w.lse_parts_offset = round_up<std::size_t>(o_bytes, kWorkspaceAlignment);
  w.bytes = w.lse_parts_offset + round_up<std::size_t>(rows * sizeof(float), kWorkspaceAlignment);
  return w;
}

// The key tile of the kernel a (head_dim, rows) problem runs; the plan rounds keys_per_split
// to it.
constexpr int block_n_for(int head_dim, int rows) {
  const int mt = mtiles_for_rows(rows);
  const int warps_n = mt >= 4 ? 1 : 4 / mt;
  const int keys_per_warp = head_dim == 256 ? 16 : 64 / warps_n;
  return keys_per_warp * warps_n;
}

// Splits in the device's per-sequence arithmetic: each sequence divides the keys its queries
// can see, [range_lo, seqlen_k), into num_splits pieces of whole tiles. keys_per_split in the
// plan is the largest piece (a sequence of max_seqlen_k keys with no window).
FLASHBUF_HOST_DEVICE constexpr int split_keys(int visible_keys, int num_splits, int block_n) {
  if (visible_keys <= 0) return 0;
  return round_up(ceil_div(visible_keys, num_splits < 1 ? 1 : num_splits), block_n);
}

// The split plan (core/split_kv.hpp) under the decode's names: the kernel reads SplitMerge
// from its parameters, the launcher and the plan use the rest.
using ::flashbuf::choose_decode_splits;
using ::flashbuf::choose_deep_ring;
using ::flashbuf::SplitChoice;
using ::flashbuf::SplitMerge;
using ::flashbuf::split_kv::kMaxClusterSplits;

}  // namespace flashbuf::kernels::decode
