// kernels: the sm80-class prefill kernel (mma.sync + ldmatrix + cp.async; runs on sm80..sm90),
// composed from the buffers layer:
//   Q  : cp.async into a swizzled tile, then QRegisterBuffer (A of S = Q K^T)
//   K  : KBufferLDS            (cp.async -> swizzled smem -> ldmatrix)       B of S = Q K^T
//   V  : VBufferTransposeLoads (cp.async -> swizzled smem -> ldmatrix.trans) B of O += P V
//   S/P: PRegisterBuffer (accumulators, masked, exponentiated, packed as the A of P V)
//   O  : OutputRegisterBuffer (rescaled online, divided by the row sums, stored via smem)
//
// One block = block_m query rows of one (batch, query head); it walks the key tiles that the
// mask lets those rows see. The pipeline is FlashAttention-2's: V(i) loads while S(i) is
// computed, K(i+1) loads while O += P V(i) is computed, one shared stage each, two barriers
// per key tile (each both "landed" and "free to overwrite").
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "flashbuf/arch/sm80/cp_async.cuh"
#include "flashbuf/arch/sm80/fast_math.cuh"
#include "flashbuf/buffers/kv_buffer.cuh"
#include "flashbuf/buffers/register_buffers.cuh"
#include "flashbuf/core/config.hpp"
#include "flashbuf/core/mask.hpp"
#include "flashbuf/kernels/prefill_common.cuh"
#include "flashbuf/kernels/prefill_params.hpp"
#include "flashbuf/kernels/prefill_tiles.hpp"

namespace flashbuf {

template <class In, int D, int Dv, bool Paged, class Tile = TableTile<D, Dv>>
struct PrefillSm80 {
  static constexpr PrefillTile kTile = Tile::value;
  static constexpr int kBM = kTile.block_m;
  static constexpr int kBN = kTile.block_n;
  static constexpr int kWarps = kTile.warps;
  static constexpr int kMTiles = kTile.m_tiles;
  static constexpr int kThreads = kWarps * 32;
  static_assert(kBM == 16 * kMTiles * kWarps, "prefill tile: block_m = 16 * m_tiles * warps");

  using TC = MmaSyncTensorCore<In>;         // S = Q K^T: K is K-major
  using TCV = MmaSyncTensorCore<In, true>;  // O += P V: V is N-major, read transposed
  using QTile = SwizzledTile<kBM, D>;
  using OTile = SwizzledTile<kBM, Dv>;
  using KBuf = KBufferLDS<TC, kBN, kBN, D, kThreads>;
  // V fragments are read 64 depth columns at a time (32 for Dv = 96) to bound registers.
  static constexpr int kVChunk = Dv % 64 == 0 ? 64 : 32;
  using VBuf = VBufferTransposeLoads<VBufferConfig<kBN, kBN, kVChunk, Dv>, TCV, kThreads>;
  using QBuf = QRegisterBuffer<TC, kMTiles, D, kBM, kTile.q_in_registers>;
  using PBuf = PRegisterBuffer<TC, kMTiles, kBN>;
  using OBuf = OutputRegisterBuffer<TCV, kMTiles, Dv>;
  static_assert(PBuf::template feeds<VBuf>(), "P's fragment order must be the one V consumes");
  static_assert(KVBuffer<KBuf> && KVBuffer<VBuf>);

  // Shared memory: Q (reused for the O epilogue), K, V.
  static constexpr int kQBytes = QTile::kBytes > OTile::kBytes ? QTile::kBytes : OTile::kBytes;
  static constexpr int kSmemBytes = kQBytes + KBuf::kSmemBytes + VBuf::kSmemBytes;
  using Softmax = OnlineSoftmax<kMTiles, PBuf::kNTiles>;
  // Softcap and mask as compile-time choices: four straight-line tile bodies from S's MMAs to
  // the softmax, which ptxas then interleaves (with runtime branches the softmax starts only
  // after S's last MMA). Only above D 128: there it fits unspilled; at D 64 / 128 the tiles sit
  // at 255 registers and the four bodies spill more and run slower (bench/NOTES-prefill.md,
  // "Measurements behind the code's choices").
  static constexpr bool kStraightTiles = D > 128;
  // At D 64 the barrier and the next K's copies come before the softmax, so the softmax and
  // O += P V are one stretch of code with no barrier or branch inside, which ptxas interleaves
  // (P's first products among its last exponentials: FlashAttention-2's order); otherwise the
  // products run back to back, each waiting on the one before. D 64 only: at D 128 the tiles sit
  // at 255 registers and the earlier barrier spills and reloads values every tile, and at D 256
  // it does not pay (bench/NOTES-prefill.md, "Measurements behind the code's choices").
  static constexpr bool kSoftmaxUnderPv = widest_head_dim(D, Dv) <= 64;

  __device__ static void run(const PrefillParams& p, char* smem) {
    const PrefillBlock blk = PrefillBlock::make_in_grid(p, kBM);  // its launcher passes no order table
    if (blk.empty()) return;
    const int warp = threadIdx.x / 32;
    const int warp_row0 = warp * 16 * kMTiles;  // this warp's first row in the block

    In* smem_q = reinterpret_cast<In*>(smem);
    KBuf kbuf;
    VBuf vbuf;
    kbuf.smem = reinterpret_cast<In*>(smem + kQBytes);
    vbuf.smem = reinterpret_cast<In*>(smem + kQBytes + KBuf::kSmemBytes);
    blk.bind_kv<In, Paged>(kbuf, vbuf, p);

    OBuf out;
    out.zero();
    Softmax softmax;
    softmax.init();

    if (!blk.keys.empty()) {
      // Keys to read: the page table is there, and the buffers' contiguous paths fold away
      // (only where they have one: elsewhere the assume only moved registers, D 192 spilled).
      if constexpr (Paged && KBuf::kContiguousPath) __builtin_assume(kbuf.src.pages != nullptr);
      if constexpr (Paged && VBuf::kContiguousPath) __builtin_assume(vbuf.src.pages != nullptr);
      const int n_first = blk.keys.begin / kBN;
      const int n_last = (blk.keys.end - 1) / kBN;
      const int seqlen_k = blk.seqlen_k;

      // Q and the first K tile.
      load_tile_async_per_chunk<QTile, kThreads>(smem_q, blk.q_ptr<In>(p), p.q_row_stride, blk.rows_q);
      kbuf.load_from_dram(n_first * kBN, seqlen_k - n_first * kBN);
      sm80::cp_async_commit_group();

      QBuf qbuf;
      qbuf.smem = smem_q;
      qbuf.warp_row0 = warp_row0;

      // One key tile. `softcap` and `masked` are bools, or std::bool_constant where the body
      // is compiled per variant (kStraightTiles).
      const auto key_tile = [&](int n, auto softcap, auto masked) {
        const int key0 = n * kBN;
        sm80::cp_async_wait_group<0>();  // K(n) (and Q) have landed: this thread's copies
        __syncthreads();                 // ... every thread's; and every warp is done with V(n-1)
        vbuf.load_from_dram(key0, seqlen_k - key0);  // V(n) loads while S(n) is computed
        sm80::cp_async_commit_group();
        if (n == n_first) qbuf.load_from_shared();

        PBuf pbuf;
        pbuf.zero();
        compute_scores(qbuf, kbuf, pbuf);
        if (softcap) Softmax::apply_softcap(pbuf.s, p.softcap_inv);
        if (masked) Softmax::apply_mask(pbuf.s, blk.mask, blk.m0 + warp_row0, key0);

        const auto next_k = [&] {
          sm80::cp_async_wait_group<0>();  // V(n) has landed
          __syncthreads();                 // ... for every thread; every warp is done with K(n)
          // K(n+1) loads while O += P V(n) is computed. With the softmax under P V the copies go
          // out after the last tile too (no row valid: they zero-fill the free K stage from
          // addresses of key0's row), a select where a branch would split softmax and P V.
          const bool more = n < n_last;
          if (kSoftmaxUnderPv || more) {
            kbuf.load_from_dram(more ? key0 + kBN : key0, more ? seqlen_k - key0 - kBN : 0);
            sm80::cp_async_commit_group();
          }
        };
        if constexpr (kSoftmaxUnderPv) next_k();
        softmax.update(pbuf.s, out, p.scale_log2);
        if constexpr (!kSoftmaxUnderPv) next_k();
        accumulate_pv(pbuf, vbuf, out);
      };
      if constexpr (kStraightTiles) {
        // The body is chosen for the whole block: its __syncthreads must be reached by every
        // thread through the same code (per warp, warps beside the diagonal took the other
        // body's barriers: compute-sanitizer synccheck, D 256 causal), so a tile that any warp
        // masks is masked by all (apply_mask leaves visible scores as they are). Rows past
        // seqlen_q are never written: they do not ask for the mask.
        const int block_rows_end = blk.m0 + blk.rows_q;
        const auto block_tile_masked = [&](int n) {
          return !tile_fully_visible(blk.mask, blk.m0, block_rows_end, n * kBN, (n + 1) * kBN);
        };
        const auto walk = [&](auto softcap) {
          for (int n = n_first; n <= n_last; ++n) {
            if (block_tile_masked(n)) {
              key_tile(n, softcap, std::true_type{});
            } else {
              key_tile(n, softcap, std::false_type{});
            }
          }
        };
        if (p.softcap_inv > 0.0f) {
          walk(std::true_type{});
        } else {
          walk(std::false_type{});
        }
      } else {
        // One body for every tile: the mask is a branch inside it, per warp.
        const int q_row0 = blk.m0 + warp_row0;
        const auto tile_masked = [&](int n) {
          return !tile_fully_visible(blk.mask, q_row0, q_row0 + 16 * kMTiles, n * kBN, (n + 1) * kBN);
        };
        for (int n = n_first; n <= n_last; ++n) key_tile(n, p.softcap_inv > 0.0f, tile_masked(n));
      }
    }

    // Epilogue: divide by the row sums, write LSE, stage O through shared memory (Q's tile).
    finalize_rows(softmax, out, p, blk, warp_row0);
    if constexpr (kSoftmaxUnderPv) sm80::cp_async_wait_group<0>();  // the last zero-fills: no copy outlives the block
    __syncthreads();  // the last tile's Q reads are done before O overwrites Q's tile
    store_output<OTile, TCV, kThreads>(out.o, smem_q, warp_row0, blk.o_ptr<In>(p), p.o_row_stride, blk.rows_q);
  }

  // Both products are software-pipelined over their k-steps: the ldmatrix of step j + 1 is
  // issued before the MMAs of step j, into the other of two fragment sets, so the MMAs never
  // wait on shared memory (the gap to FlashAttention-2 was dependency stalls, not throughput).

  // S = Q K^T for this warp's rows: walk the head dim in k-steps of 16.
  __device__ static void compute_scores(const QBuf& qbuf, const KBuf& kbuf, PBuf& pbuf) {
    constexpr int kSteps = D / 16;
    typename QBuf::Stage q[2];
    typename KBuf::Fragments k[2];
    qbuf.template load_stage<0>(q[0]);
    kbuf.template load_from_shared<0>(0, k[0]);
    static_for<kSteps>([&](auto step) {
      constexpr int j = decltype(step)::value;
      if constexpr (j + 1 < kSteps) {
        qbuf.template load_stage<j + 1>(q[(j + 1) % 2]);
        kbuf.template load_from_shared<j + 1>(0, k[(j + 1) % 2]);
      }
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        const auto& a = qbuf.template a_tile<j>(q[j % 2], mt);
#pragma unroll
        for (int nt = 0; nt < PBuf::kNTiles; ++nt) TC::mma(pbuf.s[mt][nt], a, k[j % 2][nt][0], k[j % 2][nt][1]);
      }
    });
  }

  // O += P V: walk the keys in k-steps of 16 and, inside each, the V depth in chunks;
  // P's A fragments are packed from S once, up front.
  __device__ static void accumulate_pv(const PBuf& pbuf, const VBuf& vbuf, OBuf& out) {
    constexpr int kChunks = Dv / kVChunk;
    constexpr int kSteps = kBN / 16 * kChunks;  // (k-step, chunk) pairs, chunk fastest
    typename PBuf::Packed a;
    pbuf.pack(a);
    typename VBuf::Fragments v[2];
    vbuf.template load_from_shared<0>(0, v[0]);
    static_for<kSteps>([&](auto step) {
      constexpr int j = decltype(step)::value;
      if constexpr (j + 1 < kSteps) vbuf.template load_from_shared<(j + 1) / kChunks>((j + 1) % kChunks, v[(j + 1) % 2]);
      constexpr int k = j / kChunks, chunk = j % kChunks;
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < kVChunk / 8; ++nt)
          TCV::mma(out.o[mt][chunk * (kVChunk / 8) + nt], a[mt][k], v[j % 2][nt][0], v[j % 2][nt][1]);
    });
  }
};

template <class In, int D, int Dv, bool Paged, class Tile = TableTile<D, Dv>>
__global__ void __launch_bounds__(PrefillSm80<In, D, Dv, Paged, Tile>::kThreads)
    prefill_sm80_kernel(const __grid_constant__ PrefillParams params) {
  extern __shared__ __align__(128) char smem[];
  PrefillSm80<In, D, Dv, Paged, Tile>::run(params, smem);
}

}  // namespace flashbuf
