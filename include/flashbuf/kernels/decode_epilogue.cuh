// kernels, decode: the split-KV kernel's epilogue (decode_kernel.cuh). After its last key
// tile every warp holds O (unnormalised) and the running max and sum of its 16 rows over its
// slice of the keys; the epilogue merges the warps of each row in shared memory, normalises,
// and then, by the plan's SplitMerge: writes the final O and LSE (one split), merges the splits
// inside its thread-block cluster (sm_90: at one row tile each block pushes its part's pieces
// to the blocks that merge them, merge_pushed; with more, each keeps its part for its peers to
// read, merge_cluster), or writes the part to the workspace for the combine kernel
// (combine.cuh). The head's sink joins each row where its final O and LSE are written.
#pragma once

#include <cstdint>

#include "flashbuf/arch/sm80/cp_async.cuh"
#include "flashbuf/arch/sm80/fast_math.cuh"
#include "flashbuf/arch/sm90/cluster.cuh"
#include "flashbuf/arch/sm90/mbarrier.cuh"
#include "flashbuf/buffers/online_softmax.cuh"
#include "flashbuf/buffers/part_merge.cuh"
#include "flashbuf/buffers/tensor_core.cuh"
#include "flashbuf/core/config.hpp"
#include "flashbuf/core/softmax_state.hpp"
#include "flashbuf/kernels/block_trace.cuh"
#include "flashbuf/kernels/decode_config.cuh"
#include "flashbuf/kernels/decode_params.cuh"

namespace flashbuf::kernels::decode {

// Merges the Parts partial results of one (row, 8 channels) piece (the warps of a block that
// split its key tiles): part i has base-2 max lse(i), row sum weight(i) and O at piece(i)
// (two float4). Writes the normalised O to acc and returns the merged base-2 LSE; parts with
// max -inf weigh 0 (their O is 0), and a piece no part saw gives O = 0, LSE = -inf. A part
// that read a NaN has a NaN sum (a NaN query leaves its max at -inf: fmaxf skips NaN), which
// makes the piece's sum, O and LSE NaN. Every part's loads are issued before any is used.
template <int Parts, class Lse, class Weight, class Piece>
__device__ __forceinline__ float merge_piece(Lse lse, Weight weight, Piece piece, float (&acc)[8]) {
  float l[Parts], w[Parts];
  float4 lo[Parts], hi[Parts];
#pragma unroll
  for (int i = 0; i < Parts; ++i) {
    l[i] = lse(i);
    w[i] = weight(i);
    const float4* const src = piece(i);
    lo[i] = src[0];
    hi[i] = src[1];
  }
  PartMerge<> merge;
#pragma unroll
  for (int i = 0; i < Parts; ++i) merge.add(l[i]);
#pragma unroll
  for (int e = 0; e < 8; ++e) acc[e] = 0.0f;
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < Parts; ++i) {
    const float f = merge.weight(l[i]);
    sum += f * w[i];
    acc[0] += f * lo[i].x; acc[1] += f * lo[i].y; acc[2] += f * lo[i].z; acc[3] += f * lo[i].w;
    acc[4] += f * hi[i].x; acc[5] += f * hi[i].y; acc[6] += f * hi[i].z; acc[7] += f * hi[i].w;
  }
  const float inv = PartMerge<>::inverse(sum);
#pragma unroll
  for (int e = 0; e < 8; ++e) acc[e] *= inv;
  return merge.lse(sum);
}

// A merged piece (8 channels of a row, two 16-byte stores) where a later merge reads it:
// shared memory for the pull cluster merge, the workspace for the combine kernel.
__device__ __forceinline__ void store_piece(float* dst, const float (&acc)[8]) {
  float4* const d = reinterpret_cast<float4*>(dst);
  d[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
  d[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
}

// The sink of query head `head` (0 without sinks), loaded by the callers of store_output
// before their merge's shared-memory reads, so its latency hides behind them.
__device__ __forceinline__ float load_sink(const DecodeParams& p, int head) {
  return p.sinks != nullptr ? p.sinks[head] : 0.0f;
}

// The final O (8 channels from column 8c) and LSE of one (token, head) row; lse2 is base 2.
// The head's sink (if any; `sink` from load_sink) joins the row here: every row's final O and
// LSE pass through once. O is already divided by its sum l, so in the row's own scale (max
// lse2, sum 1: sink_weight_log2 in core) it is divided by 1 + e^(sink - lse) (a row with no
// key: by +inf, so O = 0); the LSE with the sink comes from apply_sink, where it is stored.
template <class Elem>
__device__ __forceinline__ void store_output(const DecodeParams& p, int b, int token, int head, int c,
                                             float (&acc)[8], float lse2, float sink) {
  float lse = lse2 * kLn2;  // -inf stays -inf
  if (p.sinks != nullptr) {
    const float factor = 1.0f / (1.0f + sink_weight_log2(sink, lse2));
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] *= factor;
    if (c == 0 && p.lse != nullptr) apply_sink(lse, sink, lse);
  }
  uint4 packed;
  packed.x = MmaSyncTensorCore<Elem>::pack(acc[0], acc[1]);
  packed.y = MmaSyncTensorCore<Elem>::pack(acc[2], acc[3]);
  packed.z = MmaSyncTensorCore<Elem>::pack(acc[4], acc[5]);
  packed.w = MmaSyncTensorCore<Elem>::pack(acc[6], acc[7]);
  Elem* const dst = static_cast<Elem*>(p.o) + b * p.o_batch_stride + token * p.o_row_stride + head * p.o_head_stride + c * 8;
  *reinterpret_cast<uint4*>(dst) = packed;
  if (c == 0 && p.lse != nullptr) {
    p.lse[b * p.lse_batch_stride + head * p.lse_head_stride + token] = lse;
  }
}

// One block's epilogue: where its rows and split are, and its shared memory (the pipeline's,
// free once the last tile is consumed: every warp's O, padded by kOPad floats a row against
// bank conflicts, then (max, sum) per warp and row, then the block's LSE per row; and, at one
// row tile, the push merge's landing past all of it: decode_config.cuh).
template <class Elem, int D, int MT>
struct DecodeEpilogue {
  using Tile = DecodeTile<D, MT>;
  static constexpr int kRows = Tile::kRows;
  static constexpr int kThreads = Tile::kThreads;
  static constexpr int kON = D / 8;        // n8 tiles of O per warp
  static constexpr int kOutChunks = D / 8;  // 8 outputs per thread and step: one 16-byte store
  static constexpr int kOStride = D + Tile::kOPad;  // floats per row of the epilogue O
  static constexpr int kPieceBytes = (8 + 1) * 4;   // a pushed piece: 8 channels and the row's LSE

  const DecodeParams& p;
  unsigned char* smem;
  unsigned char* landing;  // the push merge's landing (Tile::landing_offset of the ring in use)
  int b, hkv, split, row0, rows_total;
  int tid, lane, wm, wn;

  __device__ float* o_smem() const { return reinterpret_cast<float*>(smem); }
  __device__ float* ml_smem() const { return o_smem() + Tile::kWarpsN * kRows * kOStride; }  // (max, sum) per warp and row
  __device__ float* lse_smem() const { return ml_smem() + Tile::kWarpsN * kRows * 2; }  // the block's LSE (base 2) per row
  __device__ static std::uint64_t* landing_barrier(unsigned char* landing) { return reinterpret_cast<std::uint64_t*>(landing); }
  __device__ float* landing_o() const { return reinterpret_cast<float*>(landing + Tile::kLandingBarrierBytes); }  // 8 floats a slot
  __device__ float* landing_lse() const { return landing_o() + Tile::kLandingSlots * 8; }

  // Whether this launch merges its splits by pushing (one row tile, the cluster merge).
  __device__ static bool pushes(const DecodeParams& p) {
    return Tile::kPushMerge && p.num_splits > 1 && p.merge == SplitMerge::cluster;
  }

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Early in the kernel, where the push merge runs: the landing barrier is initialised (one
  // arrival a thread, in merge_pushed, with the bytes its slots expect) and published to the
  // peers by a cluster arrival, which they wait for before their first push (merge_warps). The
  // key loop lies between the two, so the wait is short.
  __device__ static void open_landing(const DecodeParams& p, unsigned char* landing, int tid) {
    if (!pushes(p)) return;
    FLASHBUF_TRACE_STEP(tid == 0, flashbuf_trace_decode_merge_read());
    if (tid == 0) {
      sm90::mbarrier_init(landing_barrier(landing), kThreads);
      sm90::fence_mbarrier_init();
    }
    FLASHBUF_TRACE_STEP(tid == 0, flashbuf_trace_decode_landing_fenced());
    __syncwarp();  // the arrival is .aligned: the whole warp, converged
    sm90::barrier_cluster_arrive_relaxed();
  }
#endif

  template <class Softmax, class OBuf>
  __device__ void run(Softmax& softmax, OBuf& out) const {
    stage_warps(softmax, out);
    FLASHBUF_TRACE_STEP(tid == 0, flashbuf_trace_decode_staged());
    const SplitMerge merge = p.num_splits == 1 ? SplitMerge::none : p.merge;
    merge_warps(merge);
    FLASHBUF_TRACE_STEP(tid == 0, flashbuf_trace_decode_part_sent());
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (merge == SplitMerge::cluster) {
      if (pushes(p)) {
        merge_pushed();
      } else {
        merge_cluster();
      }
    }
#endif
  }

  // Every warp's O and (max, sum) into shared memory, once the pipeline has drained.
  template <class Softmax, class OBuf>
  __device__ void stage_warps(Softmax& softmax, OBuf& out) const {
    // The NaN rule: a row that read a NaN gets NaN in every O element and NaN LSE. A NaN query
    // or key makes the row sum NaN already; a NaN value reaches only O's columns, so a thread
    // whose elements of a row hold one makes its partial sum NaN, the quad sum below carries it
    // to the row's lanes, and merge_piece makes every piece's O and the LSE NaN (unsplit rows,
    // cluster parts and workspace parts alike: the merges and the combine keep a NaN part NaN).
    float (&row_sum)[2] = softmax.row_sum[0];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (out.holds_nan(0, h)) row_sum[h] = __int_as_float(0x7fffffff);
      row_sum[h] = quad_sum(row_sum[h]);
    }
    sm80::cp_async_wait_group<0>();
    __syncthreads();  // every warp is done with the pipeline buffers: reuse them

    float* const so = o_smem();
    float* const sml = ml_smem();
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = wm * 16 + (lane >> 2) + 8 * h;
      // Rows past the packed rows (a GQA group of 4 fills 4 of a tile's 16) are never read by
      // the merges: their stores, three quarters of the staging there, are skipped.
      if (row0 + r >= rows_total) continue;
      float* const orow = so + (wn * kRows + r) * kOStride + 2 * (lane & 3);
#pragma unroll
      for (int n = 0; n < kON; ++n) {
        *reinterpret_cast<float2*>(orow + n * 8) = make_float2(out.o[0][n][2 * h], out.o[0][n][2 * h + 1]);
      }
      if ((lane & 3) == 0) {
        sml[(wn * kRows + r) * 2] = softmax.row_max_log2[0][h];
        sml[(wn * kRows + r) * 2 + 1] = row_sum[h];
      }
    }
    __syncthreads();
  }

  // Each row's warps merged and normalised: the final O and LSE (merge none), the block's part
  // pushed to the blocks that merge it (cluster, one row tile: push_piece) or over warp 0's O
  // and the LSE slots (cluster, more row tiles), or its part in the workspace.
  __device__ void merge_warps(SplitMerge merge) const {
    const int T = p.q_per_seq;
    constexpr int kOutPasses = ceil_div(kRows * kOutChunks, kThreads);
    float* const so = o_smem();
    float* const sml = ml_smem();
    float* const sxl = lse_smem();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const bool push = pushes(p);
    if (push) sm90::barrier_cluster_wait();  // every peer's landing barrier is initialised (open_landing)
    FLASHBUF_TRACE_STEP(push && tid == 0, flashbuf_trace_decode_peers_open());
#endif
#pragma unroll
    for (int i = 0; i < kOutPasses; ++i) {
      const int idx = i * kThreads + tid;
      const int r = idx / kOutChunks;
      const int c = idx % kOutChunks;
      const int gr = row0 + r;
      if (r >= kRows || gr >= rows_total) continue;
      const auto [token, head] = p.packed_row(gr, hkv);
      const float sink = merge == SplitMerge::none ? load_sink(p, head) : 0.0f;
      float acc[8];
      const float lse2 = merge_piece<Tile::kWarpsN>(
          [&](int w) { return sml[(w * kRows + r) * 2]; }, [&](int w) { return sml[(w * kRows + r) * 2 + 1]; },
          [&](int w) { return reinterpret_cast<const float4*>(so + (w * kRows + r) * kOStride + c * 8); }, acc);
      if (merge == SplitMerge::none) {
        store_output<Elem>(p, b, token, head, c, acc, lse2, sink);
      } else if (merge == SplitMerge::cluster) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        if (push) {
          push_piece(r * kOutChunks + c, acc, lse2);
          continue;
        }
#endif
        store_piece(so + r * kOStride + c * 8, acc);  // over warp 0's O: only this thread uses these 8 floats
        if (c == 0) sxl[r] = lse2;
      } else {
        const std::int64_t part_row =
            (static_cast<std::int64_t>(split) * p.batch * T + static_cast<std::int64_t>(b) * T + token) * p.heads_q + head;
        store_piece(p.o_parts + part_row * D + c * 8, acc);
        if (c == 0) p.lse_parts[part_row] = lse2 * kLn2;
      }
    }
  }

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900  // the cluster intrinsics exist from sm_90 on
  // The lanes of a cluster merge: a group of g = next power of two >= n adjacent lanes per
  // piece (n = num_splits in [2, 16]: g in [2, 16], divides 32), lane j holding part j.
  __device__ static int lane_group(int n) { return 1 << (32 - __clz(n - 1)); }

  // The cluster merge of one lane's part of piece `piece` (a row's 8 channels), `valid` for a
  // lane inside the merge's items: `read(l, lo, hi)` loads the part's base-2 LSE and normalised
  // O where the lane holds one (part < num_splits); the others keep l = -inf and O = 0 (weight
  // 0: merge_lane_group; a NaN part makes the piece NaN). The group's first lane writes the
  // final O and LSE with the head's sink. Every lane of the warp calls it (the shuffles).
  template <class Read>
  __device__ void merge_part(int g, int piece, int part, bool valid, Read read) const {
    const int c = piece % kOutChunks;
    const auto [token, head] = p.packed_row(row0 + piece / kOutChunks, hkv);
    const bool stores = valid && part == 0;
    const float sink = stores ? load_sink(p, head) : 0.0f;
    float l = kNegInf;
    float4 lo = make_float4(0.0f, 0.0f, 0.0f, 0.0f), hi = lo;
    if (valid && part < p.num_splits) read(l, lo, hi);
    float acc[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    const float lse2 = merge_lane_group(g, l, acc);
    if (stores) store_output<Elem>(p, b, token, head, c, acc, lse2, sink);
  }

  // Push merge, the sending side: piece i of this block's part (8 channels of its normalised O
  // and the row's LSE) into the landing of block i % n, slot (i / n) * n + split.
  __device__ void push_piece(int piece, const float (&acc)[8], float lse2) const {
    const int n = p.num_splits;
    const int owner = piece % n;
    const int slot = (piece / n) * n + split;
    const std::uint32_t bar = sm90::mapa_shared_cluster(landing_barrier(landing), owner);
    const std::uint32_t o = sm90::mapa_shared_cluster(landing_o() + slot * 8, owner);
    sm90::st_async_v4_f32(o, make_float4(acc[0], acc[1], acc[2], acc[3]), bar);
    sm90::st_async_v4_f32(o + 16, make_float4(acc[4], acc[5], acc[6], acc[7]), bar);
    sm90::st_async_f32(sm90::mapa_shared_cluster(landing_lse() + slot, owner), lse2, bar);
  }

  // Push merge, the merging side: this block merges pieces split, split + n, ... of the rows;
  // lane group k of its items takes local piece k (piece k * n + split), lane j of the group
  // the part that block j pushed into slot k * n + j. Each thread arrives on the landing
  // barrier with the bytes of its own slots, then waits for every slot to have landed. No
  // block reads another's shared memory, and this one lives until its bytes have landed, so
  // no cluster barrier closes the merge. (One cluster barrier and a round trip of peer reads
  // fewer than merge_cluster: bench/NOTES-decode.md.)
  __device__ void merge_pushed() const {
    const int n = p.num_splits;
    const int g = lane_group(n);
    const int pieces = min(kRows, rows_total - row0) * kOutChunks;
    const int items = (pieces > split ? ceil_div(pieces - split, n) : 0) * g;
    std::uint32_t bytes = 0;
    for (int i = tid; i < items; i += kThreads) bytes += (i & (g - 1)) < n ? kPieceBytes : 0;
    std::uint64_t* const bar = landing_barrier(landing);
    sm90::mbarrier_arrive_expect_tx(bar, bytes);
    sm90::mbarrier_wait_parity_acquire_cluster(bar, 0);
    FLASHBUF_TRACE_STEP(tid == 0, flashbuf_trace_decode_landed());
    const float* const lo_slots = landing_o();
    const float* const lse_slots = landing_lse();
    // Warp-uniform trip count (every lane joins the shuffles); lanes past the end read nothing.
    for (int i = tid; i - lane < items; i += kThreads) {
      const int slot = (i / g) * n + (i & (g - 1));
      merge_part(g, (i / g) * n + split, i & (g - 1), i < items, [&](float& l, float4& lo, float4& hi) {
        l = lse_slots[slot];
        lo = reinterpret_cast<const float4*>(lo_slots + slot * 8)[0];
        hi = reinterpret_cast<const float4*>(lo_slots + slot * 8)[1];
      });
    }
  }

  // Pull merge (more than one row tile): the num_splits blocks of this (sequence, kv head, row
  // chunk) are one cluster (rank = split), each holding its normalised O and LSE in shared
  // memory. One thread per (piece, part): a piece (row, 8 channels) owns a group of g adjacent
  // lanes, lane j reads part j from block j's shared memory (merge_part). The pieces spread
  // over every block of the cluster. (One thread merging all parts of a piece ran ~600
  // instructions in one warp of one block after the barrier: the latency-bound rows' largest
  // single cost.)
  __device__ void merge_cluster() const {
    float* const so = o_smem();
    float* const sxl = lse_smem();
    sm90::barrier_cluster_arrive_release();  // every block's partial is in its shared memory
    sm90::barrier_cluster_wait();
    const int n = p.num_splits;
    const int g = lane_group(n);
    const int items = min(kRows, rows_total - row0) * kOutChunks * g;
    // Warp-uniform trip count (every lane joins the shuffles); lanes past the end read nothing.
    for (int idx = split * kThreads + tid; idx - lane < items; idx += n * kThreads) {
      const int part = idx & (g - 1);
      const int piece = idx / g;
      merge_part(g, piece, part, idx < items, [&](float& l, float4& lo, float4& hi) {
        const int r = piece / kOutChunks;
        l = sm90::ld_shared_cluster_f32(sm90::mapa_shared_cluster(sxl + r, part));
        const std::uint32_t a = sm90::mapa_shared_cluster(so + r * kOStride + (piece % kOutChunks) * 8, part);
        lo = sm90::ld_shared_cluster_v4_f32(a);
        hi = sm90::ld_shared_cluster_v4_f32(a + 16);
      });
    }
    // Keep this block's shared memory alive until the peers have read it. Relaxed: the reads
    // are complete (their values are in the stores above), and the stores need not drain
    // before the peers may exit.
    sm90::barrier_cluster_arrive_relaxed();
    sm90::barrier_cluster_wait();
  }
#endif
};

}  // namespace flashbuf::kernels::decode
