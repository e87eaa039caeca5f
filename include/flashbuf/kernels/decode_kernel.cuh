// Kernels layer, decode: the split-KV token-generation kernel (mma.sync m16n8k16, cp.async
// pipeline; runs on sm80 and sm90). One block computes the packed query rows of one
// (sequence, kv head, row chunk) against one split of that sequence's keys, streaming K and V
// tiles through a cp.async ring in shared memory (kStages deep, kDeepStages when the grid
// is paged and leaves each block an SM of its own). It writes the final O and LSE
// (one split), or merges its split with the others of its thread-block cluster through
// distributed shared memory (sm_90), or writes a partial O (fp32, normalised) and its LSE to
// the workspace, which the combine (combine.cuh, the public merge_states) folds together
// (decode_config.cuh's SplitMerge says when each).
//
// Each warp's scores and output are the buffer layer's register buffers (PRegisterBuffer,
// OutputRegisterBuffer: one m16 tile of packed query rows), its softmax the prefill kernels'
// (OnlineSoftmax, buffers/online_softmax.cuh), and it reads Q, K and V through the Q buffer
// and the K/V buffers (each warp's slice of a ring stage viewed as a tile of its own). The
// ring is the buffer layer's too (buffers/kv_tile_ring.cuh, over KVSource's page addressing),
// and the merges of partial states are buffers/part_merge.cuh's.
//
// The launch shape depends only on the plan (max sizes): lengths come from seqlens_k on the
// device, so a captured CUDA graph replays correctly for any lengths <= max_seqlen_k.
//
// Shared memory of one block (D = 128, MTiles = 1: 3 stages, 100 KB; the deep ring of a paged
// grid with one block per SM has 6, 199 KB, then the page-entry slots after Q; at one row tile
// the push merge's landing, 10 KB, follows: decode_config.cuh):
//
//   stage 0                  stage 1                  stage 2                  Q
//   +-----------+-----------+-----------+-----------+-----------+-----------+---------+
//   | K 64x128  | V 64x128  | K         | V         | K         | V         | 16x128  |
//   |  16 KB    |  16 KB    |           |           |           |           |  4 KB   |
//   +-----------+-----------+-----------+-----------+-----------+-----------+---------+
//   every row (one key / one query) is D*2 bytes = kChunksPerRow chunks of 16 bytes;
//   chunk c of row r lives at chunk position c ^ (r % 8) (XOR swizzle):
//
//     row r:  chunk bits  [ c_hi | c2 c1 c0 ]   stored at  [ c_hi | (c2 c1 c0) ^ (r2 r1 r0) ]
//
//   so the 8 rows an ldmatrix phase reads (same logical chunk, rows r..r+7) hit 8 distinct
//   16-byte bank groups, and a warp's cp.async writes (consecutive chunks of one row) too.
//   After the last tile the whole buffer, but the push merge's landing, is reused for the
//   epilogue (per-warp O and (m, l)).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "flashbuf/arch/sm80/cp_async.cuh"
#include "flashbuf/arch/sm80/fast_math.cuh"
#include "flashbuf/arch/sm80/ld_shared.cuh"
#include "flashbuf/arch/sm80/ldmatrix.cuh"
#include "flashbuf/arch/sm80/mad_wide.cuh"
#include "flashbuf/arch/sm80/mma.cuh"
#include "flashbuf/arch/sm90/cluster.cuh"
#include "flashbuf/arch/sm90/griddepcontrol.cuh"
#include "flashbuf/buffers/kv_buffer.cuh"
#include "flashbuf/buffers/kv_tile_ring.cuh"
#include "flashbuf/buffers/online_softmax.cuh"
#include "flashbuf/buffers/part_merge.cuh"
#include "flashbuf/buffers/register_buffers.cuh"
#include "flashbuf/buffers/tensor_core.cuh"
#include "flashbuf/core/config.hpp"
#include "flashbuf/core/mask.hpp"
#include "flashbuf/core/softmax_state.hpp"
#include "flashbuf/kernels/block_trace.cuh"
#include "flashbuf/kernels/decode_config.cuh"
#include "flashbuf/kernels/decode_epilogue.cuh"
#include "flashbuf/kernels/decode_params.cuh"

namespace flashbuf::kernels::decode {

// One block's work; decode_split_kv_kernel below is all it is, and bench/trace_decode.cu wraps
// it in a kernel of its own with the timeline's hooks (block_trace.cuh).
template <class Elem, int D, int MT, bool Lean>
__device__ __forceinline__ void decode_split_kv_block(const DecodeParams& p) {
  FLASHBUF_TRACE_STEP(threadIdx.x == 0, flashbuf_trace_decode_start());
  using Tile = DecodeTile<D, MT>;
  static_assert(check_decode_tile<D, MT>());
  // The buffers' m16n8k16 descriptions: S = Q K^T (K-major B) and O += P V (V N-major, read
  // transposed), and the conversion that packs P.
  using TC = MmaSyncTensorCore<Elem>;
  using TCV = MmaSyncTensorCore<Elem, true>;
  // Each warp's scores (P) and output (O) in the register buffers, one m16 tile of rows; the
  // online softmax is the prefill kernels'.
  using PBuf = PRegisterBuffer<TC, 1, Tile::kKeysPerWarp>;
  using OBuf = OutputRegisterBuffer<TCV, 1, D>;
  using Softmax = OnlineSoftmax<1, Tile::kKeysPerWarp / 8>;
  // Q's rows in the buffer layer's Q buffer (over the block's Q tile); K and V through the
  // K and V buffers' reads, each warp viewing its slice of a stage (kKeysPerWarp keys from
  // key wn * kKeysPerWarp, a multiple of 16: the slice keeps the stage's swizzle) as a tile of
  // its own, filled by the block's ring below (the views' NumThreads is the warp reading them).
  using QBuf = QRegisterBuffer<TC, 1, D, Tile::kRows, Tile::kQInRegisters>;
  using KView = KVBufferLDS<KBufferConfig<Tile::kKeysPerWarp, D, Tile::kKeysPerWarp>, TC, 32>;
  static constexpr int kVChunk = 32;  // V columns per fragment read: 8 registers
  using VView = KVBufferLDS<VBufferConfig<Tile::kKeysPerWarp, Tile::kKeysPerWarp, kVChunk, D>, TCV, 32>;
  constexpr int kRows = Tile::kRows;
  constexpr int kBN = Tile::kBlockN;
  constexpr int kKW = Tile::kKeysPerWarp;
  constexpr int kStages = Tile::kStages;
  constexpr int kCPR = Tile::kChunksPerRow;
  constexpr int kRowBytes = Tile::kRowBytes;
  constexpr int kThreads = Tile::kThreads;
  constexpr int kQK = D / 16;      // k16 steps of Q.K^T

  extern __shared__ __align__(128) unsigned char smem[];
  // The ring's depth: kStages, or kDeepStages when the launch gave this block its SM alone.
  const bool deep = !Lean && Tile::kDeepStages > kStages && p.deep_ring;
  const int S = deep ? Tile::kDeepStages : kStages;
  unsigned char* const smem_q = smem + (deep ? Tile::q_offset(Tile::kDeepStages) : Tile::q_offset(kStages));

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int wm = warp / Tile::kWarpsN;  // this warp's 16-row tile
  const int wn = warp % Tile::kWarpsN;  // this warp's slice of every key tile
  const int split = blockIdx.x;
  const int hkv = blockIdx.y % p.heads_kv;
  const int chunk = blockIdx.y / p.heads_kv;
  const int b = blockIdx.z;

  // The combine (if any) may start launching: its blocks wait for this grid to finish.
  sm90::griddepcontrol_launch_dependents();
  // The push merge's landing barrier (decode_epilogue.cuh): in the lean kernel before any copy,
  // since its initialising thread's fence, placed after the copies, delays that thread; in the
  // general one after the prologue, so that the page entries' round trip, which the first copies
  // wait on, goes out first. Both placements were measured against the others
  // (bench/NOTES-decode.md).
  using Epilogue = DecodeEpilogue<Elem, D, MT>;
  unsigned char* const landing = smem + (deep ? Tile::landing_offset(Tile::kDeepStages) : Tile::landing_offset(kStages));
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (Lean) Epilogue::open_landing(p, landing, tid);
#endif
  FLASHBUF_TRACE_STEP(tid == 0, flashbuf_trace_decode_landing_opened());

  // ---- which keys this block may read, before its sequence's length is known -------------
  // The length is a dependent global load; every copy that does not need it is issued while
  // it is in flight. Without a left window every sequence's keys start at 0 and the splits
  // are cut from the capacity (static: split s holds keys [s * kps, (s + 1) * kps)), so the
  // first tiles' copies (and, paged, their page-table entries) go out at once, bounded by the
  // capacity; rows they read past the length are masked as scores and their V rows zeroed
  // before use (a cache's unused rows may hold anything, NaN included, and 0 * NaN is NaN).
  // (A split past a shorter sequence's end still reads its first tiles once: at most what it
  // would read with keys to do.)
  // A left window makes each sequence's first key depend on its length: the splits divide
  // the visible keys of each sequence and the copies wait for the length.
  const int len_loaded = p.seqlens_k[b];
  const bool static_splits = Lean || p.window_left < 0;
  const int kps_static = p.keys_per_split_static;
  int blk_lo = static_splits ? split * kps_static : 0;
  const int early_hi = static_splits ? min(blk_lo + kps_static, p.kv_capacity) : 0;  // rows the early copies read
  int blk_hi = early_hi;

  // ---- loads ---------------------------------------------------------------------------
  const Elem* const q_seq = static_cast<const Elem*>(p.q) + b * p.q_batch_stride;
  const Elem* const k_head = static_cast<const Elem*>(p.k) + hkv * p.k_head_stride;
  const Elem* const v_head = static_cast<const Elem*>(p.v) + hkv * p.v_head_stride;
  const bool paged = !Lean && p.page_table != nullptr;
  const std::int32_t* const page_row = p.page_table + (paged ? b * p.page_table_stride : 0);
  const int T = p.q_per_seq;
  const int G = p.group;
  const int rows_total = T * G;
  const int row0 = chunk * kRows;

  // K and V through the ring of stages (buffers/kv_tile_ring.cuh) over the buffers' sources
  // (buffers/kv_source.cuh), whose page addressing prefill's paged copies use too: contiguous,
  // from this sequence's first row; paged, the pool, with the page-table entries copied a few
  // tiles ahead into the slots after Q.
  const int load_chunk = tid % kCPR;
  using Ring = KVTileRing<Elem, Tile>;
  Ring ring{smem,
            reinterpret_cast<std::int32_t*>(smem_q + Tile::kQBytes),
            deep,
            paged,
            KVSource<Elem>{k_head, p.k_row_stride, page_row, p.k_batch_stride, p.page_div, p.num_pages},
            k_head,
            v_head,
            reinterpret_cast<const unsigned char*>(k_head + load_chunk * 8),
            reinterpret_cast<const unsigned char*>(v_head + load_chunk * 8),
            p.k_page_bytes,
            p.k_row_bytes,
            p.v_page_bytes,
            p.v_row_bytes,
            tid / kCPR,
            load_chunk,
            blk_lo};

  // Q rows: packed row gr = token * G + g -> q[b, token, hkv * G + g, :]; padding rows are 0.
  {
    constexpr int kQPasses = kRows * kCPR / kThreads;
#pragma unroll
    for (int i = 0; i < kQPasses; ++i) {
      const int idx = i * kThreads + tid;
      const int r = idx / kCPR;
      const int c = idx % kCPR;
      const int gr = row0 + r;
      const bool valid = gr < rows_total;
      const Elem* src = q_seq;
      if (valid) {
        const auto row = p.packed_row(gr, hkv);
        src += row.token * p.q_row_stride + row.head * p.q_head_stride + c * 8;
      }
      sm80::cp_async_cg_16(smem_q + swizzled_chunk_offset(r, c, kRowBytes), src, valid);
    }
  }
  FLASHBUF_TRACE_STEP(tid == 0, flashbuf_trace_decode_q_issued());
  // Contiguous caches: this sequence's K and V rows, from its first.
  const auto k_seq = [&] { return KVSource<Elem>{k_head + b * p.k_batch_stride, p.k_row_stride}; };
  const auto v_seq = [&] { return KVSource<Elem>{v_head + b * p.v_batch_stride, p.v_row_stride}; };
  if (static_splits) ring.issue_prologue(S, early_hi, k_seq(), v_seq());
  FLASHBUF_TRACE_STEP(tid == 0, flashbuf_trace_decode_copies_issued());
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (!Lean) Epilogue::open_landing(p, landing, tid);
#endif

  // ---- the length: this block's keys ----------------------------------------------------
  const int len = len_loaded < 0 ? 0 : (len_loaded > p.kv_capacity ? p.kv_capacity : len_loaded);  // bad lengths stay in bounds
  FLASHBUF_TRACE_STEP(tid == 0, flashbuf_trace_decode_length(len));
  const MaskParams mask{T, len, p.window_left, p.window_right};
  // Each sequence's visible keys, cut into num_splits whole-tile pieces (static: see above).
  const KeyRange seq = key_range(mask, 0, T);
  const int kps = static_splits ? kps_static : split_keys(seq.size(), p.num_splits, kBN);
  const int split_lo = static_splits ? blk_lo : seq.begin + split * kps;
  const int split_hi = min(split_lo + kps, seq.end);
  // The tokens of this block's rows narrow it further (sliding window, causal).
  const int tok_first = p.group_div.div(row0);
  const int tok_last = p.group_div.div(min(rows_total, row0 + kRows) - 1);
  const KeyRange blk = key_range(mask, tok_first, tok_last + 1);
  if (!static_splits) blk_lo = max(split_lo, blk.begin);  // static: blk.begin is 0 (no left window)
  blk_hi = min(split_hi, blk.end);
  const int n_tiles = blk_hi > blk_lo ? ceil_div(blk_hi - blk_lo, kBN) : 0;
  if (!static_splits) {
    ring.blk_lo = blk_lo;
    ring.issue_prologue(S, blk_hi, k_seq(), v_seq());
  }

  // The two rows this thread holds in the MMA accumulators (lane / 4 and lane / 4 + 8 of the
  // warp's tile) and the keys each may see in this split.
  int row_lo[1][2], row_hi[1][2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int gr = row0 + wm * 16 + (lane >> 2) + 8 * h;
    row_lo[0][h] = 0;
    row_hi[0][h] = 0;
    if (gr < rows_total) {
      const int token = p.group_div.div(gr);
      const KeyRange kr = key_range(mask, token, token + 1);
      row_lo[0][h] = max(kr.begin, split_lo);
      row_hi[0][h] = min(kr.end, split_hi);
    }
  }

  // ---- main loop -----------------------------------------------------------------------
  OBuf out;
  out.zero();
  PBuf pbuf;
  Softmax softmax;
  softmax.init();
  QBuf qbuf;
  qbuf.smem = reinterpret_cast<const Elem*>(smem_q);
  qbuf.warp_row0 = wm * 16;
  KView kview;
  VView vview;
  const bool softcap = p.softcap_log2 > 0.0f;
  // Scores times scale_log2 are base 2 (after softcap's tanh(x * score_scale), if any).
  const float scale_log2 = softcap ? p.softcap_log2 : p.score_scale;

  int stage = 0;  // tile t's stage, t % S
  for (int t = 0; t < n_tiles; ++t) {
    // (The stamp waits for the warp's last product of step t - 1: its value depends on it.)
    FLASHBUF_TRACE_STEP(tid == 0 && t > 0, flashbuf_trace_decode_step_done(t - 1, __float_as_int(out.o[0][D / 8 - 1][3])));
    if (deep) {
      sm80::cp_async_wait_group<Tile::kDeepStages - 2>();
    } else {
      sm80::cp_async_wait_group<kStages - 2>();
    }
    FLASHBUF_TRACE_STEP(tid == 0, flashbuf_trace_decode_own_copies_landed(t));
    if (t < S - 1 && blk_hi < early_hi) ring.zero_v_rows_past(t, blk_hi);  // an early tile read past the length
    __syncthreads();  // tile t visible to all; tile t-1's buffer free for reuse
    FLASHBUF_TRACE_STEP(tid == 0, flashbuf_trace_decode_tile_ready(t));
    if (t == 0) qbuf.load_from_shared();  // Q has landed (a no-op unless it stays in registers)
    {
      const int next = t + S - 1;  // into tile t - 1's stage, free since the barrier above
      ring.load_tile(next, stage == 0 ? S - 1 : stage - 1, blk_hi);
      ring.fetch_entries(next + S - 1, blk_hi);
      sm80::cp_async_commit_group();
    }

    kview.smem = reinterpret_cast<Elem*>(ring.k_stage(stage) + wn * kKW * kRowBytes);
    vview.smem = reinterpret_cast<Elem*>(ring.v_stage(stage) + wn * kKW * kRowBytes);
    stage = stage + 1 == S ? 0 : stage + 1;

    // S = Q K^T over this warp's kKW keys (fp32 accumulators, C layout of m16n8).
    pbuf.zero();
    static_for<kQK>([&](auto kc) {
      constexpr int ks = decltype(kc)::value;
      const std::uint32_t (&a)[4] = qbuf.template mma_tile<ks>(0);
      kview.template load_from_shared<ks>(0);
#pragma unroll
      for (int n = 0; n < kKW / 8; ++n) TC::mma(pbuf.s[0][n], a, kview.mma_tile()[n][0], kview.mma_tile()[n][1]);
    });

    // Softcap, the keys outside each row's range hidden, then the online softmax: P = exp2 of
    // the base-2 scores against each row's running max, and O rescaled.
    if (softcap) Softmax::apply_softcap(pbuf.s, p.score_scale);
    Softmax::apply_key_bounds(pbuf.s, row_lo, row_hi, blk_lo + t * kBN + wn * kKW);
    softmax.update(pbuf.s, out, scale_log2);

    // O += P V: the S accumulators of keys 16kk..16kk+15 are the A fragment as they stand.
    typename PBuf::Packed packed;
    pbuf.pack(packed);
    static_for<kKW / 16>([&](auto kc) {
      constexpr int kk = decltype(kc)::value;
#pragma unroll
      for (int chunk = 0; chunk < D / kVChunk; ++chunk) {
        vview.template load_from_shared<kk>(chunk);
#pragma unroll
        for (int n = 0; n < kVChunk / 8; ++n) {
          TCV::mma(out.o[0][chunk * (kVChunk / 8) + n], packed[0][kk], vview.mma_tile()[n][0], vview.mma_tile()[n][1]);
        }
      }
    });
  }

  // (The stamp waits for the warp's last product: its value depends on it.)
  FLASHBUF_TRACE_STEP(lane == 0, flashbuf_trace_decode_keys_done(__float_as_int(out.o[0][D / 8 - 1][3])));

  // ---- epilogue (decode_epilogue.cuh) -------------------------------------------------
  Epilogue{p, smem, landing, b, hkv, split, row0, rows_total, tid, lane, wm, wn}.run(softmax, out);
  FLASHBUF_TRACE_STEP(tid == 0, flashbuf_trace_decode_end());
}

// Lean: the launch has a contiguous cache and no left window (the launcher checks), so the
// paged copies, the page-entry ring, the deep ring and the splits cut from each sequence's own
// length are compiled out. The latency-bound launches (a few blocks, each a handful of tiles)
// run this kernel's body once per SM from a cold instruction cache, where the code's length is
// itself a cost (bench/NOTES-decode.md, the profile of the latency-bound rows).
template <class Elem, int D, int MT, bool Lean = false>
__global__ void __launch_bounds__(DecodeTile<D, MT>::kThreads)
    decode_split_kv_kernel(const __grid_constant__ DecodeParams p) {
  decode_split_kv_block<Elem, D, MT, Lean>(p);
}

}  // namespace flashbuf::kernels::decode
