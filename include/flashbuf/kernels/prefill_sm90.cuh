// kernels: the Hopper prefill kernel (sm_90a), the same buffer concepts in their wgmma forms,
// warp-specialised:
//   Q  : TMA (batch form; varlen: cp.async) into a slab-major 128B-swizzled tile;
//        QSharedBufferSm90 hands each consumer warpgroup the descriptor of its 64 rows (A of
//        S = Q K^T from shared memory)
//   K  : KVBufferLDSSm90<KBufferConfig>  (K-major B of S = Q K^T), a StageRing of stages
//   V  : KVBufferLDSSm90<VBufferConfig>  (N-major B of O += P V, the descriptor's transpose)
//   S/P: PRegisterBuffer over the wgmma accumulators (per warp the mma.sync C layout), packed
//        into A fragments of O += P V straight from registers (wgmma's register-A form)
//   O  : OutputRegisterBuffer, the sm80 kernel's epilogue (store_output) over Q's slabs: each
//        consumer writes its own 64 rows when its last P V is done, not waiting for the other
//
// Block = 3 warpgroups (D 64: the producer and one consumer, two blocks per SM):
//   WG 0  producer  (setmaxnreg down): Q, then K(i), V(i) for every key tile into the rings;
//                    each stage is handed over on mbarriers (StageRing). One thread per
//                    operand (K: thread 0, V: thread 32) issues TMA boxes (tensor maps from the
//                    host: batch-form, seqlens_k and varlen K/V, and pages whose boxes the
//                    launcher's rule takes); where the map's rows go on past a sequence, its
//                    last tile, which reaches past the end, is gathered by all 128 threads with
//                    cp.async, as every tile is for other page sizes.
//   WG 1  consumer  query rows   0..63  of the block  (setmaxnreg up)
//   WG 2  consumer  query rows  64..127
//   (WG 3 consumer  query rows 128..191: D 64's long items, a block each of three consumers)
//
// A consumer overlaps its softmax with its own matrix products and with the other's:
//
//   issue S(i) = Q K(i)^T  and  O += P(i-1) V(i-1)     <- in turn with the other consumer
//   wait S(i); softmax of S(i) (max, exp, sum)          (the tensor cores run O += P V, then the
//   wait O; rescale O; P(i) = pack(S(i))                 other warpgroup's two products)
//
// "In turn" (ping-pong): a named barrier per consumer orders the issue phases WG1, WG2, WG1, ...
// (round robin WG1, WG2, WG3 with three) so one warpgroup's softmax runs while the others'
// products occupy the tensor cores.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "flashbuf/arch/sm80/cp_async.cuh"
#include "flashbuf/arch/sm90/named_barrier.cuh"
#include "flashbuf/arch/sm90/setmaxnreg.cuh"
#include "flashbuf/arch/sm90/tma.cuh"
#include "flashbuf/arch/sm90/wgmma.cuh"
#include "flashbuf/buffers/kv_buffer_sm90.cuh"
#include "flashbuf/buffers/register_buffers.cuh"
#include "flashbuf/buffers/smem_tile_sm90.cuh"
#include "flashbuf/buffers/smem_tile.cuh"
#include "flashbuf/buffers/stage_ring_sm90.cuh"
#include "flashbuf/buffers/tensor_core.cuh"
#include "flashbuf/kernels/block_trace.cuh"
#include "flashbuf/kernels/prefill_common.cuh"
#include "flashbuf/kernels/prefill_params.hpp"
#include "flashbuf/kernels/prefill_tiles.hpp"

namespace flashbuf {

// Shared memory one block may use with `ctas_per_sm` resident per SM (H100/H200: 228 KB per
// SM, 1 KB of it reserved per block, 227 KB at most for one block).
constexpr int prefill_sm90_smem_budget(int ctas_per_sm) {
  return ctas_per_sm <= 1 ? 227 * 1024 : 228 * 1024 / ctas_per_sm - 1024;
}
// Stages per ring: as many K+V stages as the block's shared memory holds beside Q, at most 4.
constexpr int prefill_sm90_stages(int q_bytes, int kv_stage_bytes, int ctas_per_sm) {
  const int usable = prefill_sm90_smem_budget(ctas_per_sm) - 2048;  // less alignment and barriers
  const int fit = (usable - q_bytes) / kv_stage_bytes;
  return fit < 4 ? fit : 4;
}

// Tensor maps of K and V for the TMA producer (valid when `enabled`; see cuda/tensor_map.hpp).
struct PrefillTmaMaps {
  CUtensorMap k;
  CUtensorMap v;
  // O of batch-form queries (cols, seqlen_q, heads, batch) in boxes of 64 columns x 64 rows:
  // one consumer's rows of one slab of the staged O tile (rows past seqlen_q are not written).
  CUtensorMap o;
  // Q of batch-form queries (cols, seqlen_q, heads, batch) in boxes of 64 columns x BM rows.
  CUtensorMap q;
  int o_enabled;  // 0: varlen queries, or strides TMA cannot describe; the threads copy O
  int q_enabled;  // 0: the same for Q; the producer warpgroup copies Q with cp.async
  int enabled;
  // 1 when the map's rows go on past a sequence's keys (paged: other pool rows; varlen: the
  // next sequence; seqlens_k: the cache's capacity): the tile that reaches past seqlen_k is
  // then gathered with cp.async (zero-filled), never read through the map.
  int gather_tail;
  int box_rows;  // rows per box: block_n, or for pages paged_tma::box_rows (core/paged_boxes.hpp)
};

// Consumers and BlockN: the tile table's (prefill_sm90_tile, kernels/prefill_tiles.hpp).
template <class In, int D, int Dv, bool Paged, int Consumers = prefill_sm90_tile(D, Dv).consumers,
          int BlockN = prefill_sm90_tile(D, Dv).block_n>
struct PrefillSm90 {
  // Consumer warpgroups per block (why: prefill_sm90_tile); one consumer runs two blocks per
  // SM, two or three take ping-pong (round-robin) turns in one block.
  static constexpr int kConsumers = Consumers;
  static constexpr int kCtasPerSm = kConsumers == 1 ? 2 : 1;
  static constexpr int kBM = 64 * kConsumers;
  static constexpr int kBN = BlockN;
  static constexpr int kProducerThreads = 128;
  static constexpr int kConsumerThreads = 128 * kConsumers;
  static constexpr int kThreads = kProducerThreads + kConsumerThreads;
  // Launched at 65536 / (kThreads * kCtasPerSm) registers per thread (168: 384 threads, one
  // block; 128: 256 threads, two blocks, or 512 threads, one); the producer keeps 40 (three
  // consumers: 32), the consumers take the rest (40 + 2 * 232 = 3 * 168; 40 + 216 = 2 * 128;
  // 32 + 3 * 160 = 4 * 128).
  static constexpr int kProducerRegisters = kConsumers == 3 ? 32 : 40;
  static constexpr int kConsumerRegisters = kConsumers == 1 ? 216 : kConsumers == 2 ? 232 : 160;
  // Where in S's softmax a steady tile waits for the previous tile's O += P V (why:
  // prefill_sm90_pv_wait).
  static constexpr ScoresHook kPvWait = prefill_sm90_pv_wait(D, Dv);
  static constexpr int kEarlyExpTiles = prefill_sm90_early_exp_tiles(D, Dv);

  using WGS = WgmmaTensorCore<In, kBN>;       // S = Q K^T over a key tile: K is K-major
  using WGO = WgmmaTensorCore<In, Dv, true>;  // O += P V: V is N-major, through the descriptor
  using QBuf = QSharedBufferSm90<WGS, kBM, D>;
  using QTile = typename QBuf::Tile;
  using KTile = SlabTile<kBN, D>;
  using VTile = SlabTile<kBN, Dv>;
  static constexpr int kAlign = 1024;  // 128-byte swizzle atoms must start 1024-byte aligned
  // O is staged over Q's tile in Q's slab layout: slab s holds columns 64s.. of every row in
  // both, so row r of O lies on row r of Q's bytes and each consumer's O rows on its own Q
  // rows. Each consumer then writes its O once its own products are done, without waiting for
  // the other's last tile (the epilogue is a fifth of a short sequence's time).
  using OTile = SlabTile<kBM, Dv>;
  static_assert(OTile::kSlabElems == QTile::kSlabElems, "O's rows must fall on the same rows of Q's slabs");
  static constexpr int kQBytes = round_up(QTile::kBytes > OTile::kBytes ? QTile::kBytes : OTile::kBytes, kAlign);
  static constexpr int kStages = prefill_sm90_stages(kQBytes, KTile::kBytes + VTile::kBytes, kCtasPerSm);
  static_assert(kStages >= 2, "prefill_sm90: shared memory must hold two K+V stages beside Q");

  using KBuf = KVBufferLDSSm90<KBufferConfig<kBN, D, kBN>, WGS, kProducerThreads, kStages>;
  using VBuf = KVBufferLDSSm90<VBufferConfig<kBN, kBN, Dv, Dv>, WGO, kProducerThreads, kStages>;
  using Ring = StageRing<kStages>;
  using PBuf = PRegisterBuffer<WGS, 1, kBN>;
  using OBuf = OutputRegisterBuffer<WGO, 1, Dv>;
  // Where a row's max is kept until a tile's exceeds it by 2^slack, and O's rescale skipped
  // (why: prefill_sm90_max_slack_log2).
  static constexpr int kMaxSlackLog2 = prefill_sm90_max_slack_log2(D, Dv);
  using Softmax = OnlineSoftmax<1, PBuf::kNTiles, kMaxSlackLog2, In>;
  static_assert(KVBuffer<KBuf> && KVBuffer<VBuf>);
  static_assert(std::is_same_v<typename KBuf::Tile, KTile> && std::is_same_v<typename VBuf::Tile, VTile>);

  // Shared memory: [Q / O epilogue][K stages][V stages][barriers: Q, K ring, V ring].
  static constexpr int kBarrierBytes = sizeof(std::uint64_t) + 2 * Ring::kBarrierBytes;
  static constexpr int kSmemBytes = kAlign + kQBytes + KBuf::kSmemBytes + VBuf::kSmemBytes + kBarrierBytes;
  static_assert(kSmemBytes <= prefill_sm90_smem_budget(kCtasPerSm),
                "prefill_sm90: over the shared memory a block may use at kCtasPerSm blocks per SM");

  // Named barriers (0 is __syncthreads).
  enum Barrier : int {
    kIssueTurn0 = 2,     // consumer c waits on kIssueTurn0 + c for its turn to issue wgmma
    kProducerSync = 5,   // the producer warpgroup (the gathered last tile of a TMA ring)
    kEpilogue0 = 6,      // consumer c's warpgroup in its epilogue: kEpilogue0 + c
  };
  static_assert(kConsumers <= 3, "prefill_sm90: named barriers for at most three consumers");

  // A consumer warpgroup's steps, shared by both schedules (a block per item here, the walk
  // over items of PrefillSm90Persistent); the buffers are parameters because the rings'
  // depths differ between the two.
  using SFrag = float[kBN / 2];  // S(i), exponentiated in place (PBuf::s)
  using OFrag = float[Dv / 2];   // O (OBuf::o)
  using PFrag = typename PBuf::Packed;

  // Issue turns (ping-pong; round robin over three): consumer c waits on kIssueTurn0 + c, then
  // passes the turn to the next (each barrier: the waiting warpgroup and the passing one). Every
  // consumer has one turn per tile plus one for the last P V; the last consumer grants consumer
  // 0 its first turn and does not pass on its last, so no arrival is left over. One consumer: no
  // turns.
  static constexpr int kTurnThreads = 2 * 128;
  __device__ static void grant_first_turn(int consumer) {
    if constexpr (kConsumers > 1) {
      if (consumer == kConsumers - 1) sm90::named_barrier_arrive(kIssueTurn0, kTurnThreads);
    }
  }
  __device__ static void take_turn(int consumer) {
    if constexpr (kConsumers > 1) sm90::named_barrier_sync(kIssueTurn0 + consumer, kTurnThreads);
  }
  __device__ static void pass_turn(int consumer, bool last) {
    if constexpr (kConsumers > 1) {
      if (!(last && consumer == kConsumers - 1)) {
        sm90::named_barrier_arrive(kIssueTurn0 + (consumer + 1) % kConsumers, kTurnThreads);
      }
    }
  }
  // Register writes (softmax, rescale, packing) must stay above wgmma.fence: the compiler
  // sees wgmma_fence as a memory barrier only, so the operands are pinned first.
  __device__ static void fence_operands(SFrag& s, OFrag& o, PFrag& packed) {
    sm90::fence_registers(s);
    sm90::fence_registers(o);
    sm90::fence_registers(packed[0]);
    sm90::wgmma_fence();
  }
  // Waits until at most `Pending` commit groups run, the last O += P V no longer among them:
  // O and P (its operand) are this warpgroup's registers again.
  template <int Pending>
  __device__ static void wait_pv(OFrag& o, PFrag& packed) {
    sm90::wgmma_wait_group<Pending>();
    sm90::fence_registers(o);
    sm90::fence_registers(packed[0]);
  }
  // S = Q K^T over the K stage `stage`, one commit group.
  template <class KBufT>
  __device__ static void issue_scores(SFrag& s, const QBuf& qbuf, KBufT& kbuf, int stage) {
    kbuf.read_from_stage(stage);
    static_for<D / 16>([&](auto kc) {
      constexpr int k = decltype(kc)::value;
      kbuf.template load_from_shared<k>(0);
      WGS::mma_ss(s, qbuf.template mma_tile<k>(), kbuf.mma_tile(), k > 0);
    });
    sm90::wgmma_commit_group();
  }
  // O += P V over the V stage `stage`, P from registers, one commit group.
  template <class VBufT>
  __device__ static void issue_pv(OFrag& o, const PFrag& packed, VBufT& vbuf, int stage) {
    vbuf.read_from_stage(stage);
    static_for<kBN / 16>([&](auto kc) {
      constexpr int k = decltype(kc)::value;
      vbuf.template load_from_shared<k>(0);
      WGO::mma_rs(o, packed[0][k], vbuf.mma_tile(), true);
    });
    sm90::wgmma_commit_group();
  }
  // A consumer thread's warpgroup and its warp's first query row in the block, broadcast from
  // lane 0: the compiler then knows they are the same in every lane and keeps Q's descriptors
  // in uniform registers (not 16 vector registers and two R2UR a product).
  struct ConsumerWarp {
    int consumer, warp_row0;
  };
  __device__ static ConsumerWarp consumer_warp(int consumer_thread) {
    const int consumer = __shfl_sync(0xffffffffu, consumer_thread / 128, 0);
    return {consumer, __shfl_sync(0xffffffffu, consumer * 64 + consumer_thread % 128 / 32 * 16, 0)};
  }
  // The key tiles the query rows from q_row0 see whole (no per-element mask): a warp's 16 by
  // default, computed once an item, so each tile's test is two compares; a warpgroup's 64.
  __device__ static TileSpan unmasked_tiles(const MaskParams& mask, int q_row0, int rows = 16) {
    return fully_visible_tiles(mask, q_row0, q_row0 + rows, kBN);
  }
  // S of key tile `key_tile` landed in registers: mask it (unless `unmasked` holds the tile:
  // a TileSpan, or EveryTile where the caller's loop runs fully visible tiles only),
  // exponentiate it, and return the O correction; q_row0 is this warp's first query row.
  // `between` runs where kPvWait says (OnlineSoftmax::update_scores). `softcap` is a bool, or a
  // std::bool_constant where the caller compiles its loop once per case (soft_capped, below).
  template <class Softcap, class Unmasked, class Between = NoHook>
  __device__ static void softmax_scores(PBuf& pbuf, Softmax& softmax, const PrefillParams& p, const MaskParams& mask,
                                        int q_row0, int key_tile, Unmasked unmasked, float (&correction)[1][2],
                                        Softcap softcap, Between between = {}) {
    sm90::fence_registers(reinterpret_cast<SFrag&>(pbuf.s));
    if (softcap) Softmax::apply_softcap(pbuf.s, p.softcap_inv);
    if (!unmasked.contains(key_tile)) Softmax::apply_mask(pbuf.s, mask, q_row0, key_tile * kBN);
    softmax.template update_scores<kPvWait, kEarlyExpTiles>(pbuf.s, p.scale_log2, correction, between);
  }
  // Runs `loop(softcap)` with softcap a std::bool_constant: the loop is compiled once with the
  // softcap's tanhf (about a thousand instructions) and once without, so that the uncapped
  // softmax does not branch over it, from S's wait into code the instruction cache may not hold.
  // (Above Dv 128 with a runtime bool: ptxas spilled more for the second loop.)
  template <class Loop>
  __device__ __forceinline__ static void soft_capped(const PrefillParams& p, Loop loop) {
    if constexpr (Dv > 128) {
      loop(p.softcap_inv > 0.0f);
    } else if (p.softcap_inv > 0.0f) {
      loop(std::true_type{});
    } else {
      loop(std::false_type{});
    }
  }
  // The main loop's steady tile, the step both schedules share (a block per item: its tiles 1 to
  // n - 1; the persistent walk: the tiles inside an item): in this consumer's turn, S(kt) is
  // issued and then O += P V(vt) of the tile before; S's softmax starts while the P V runs; then O
  // is rescaled by the softmax's correction and P(kt) packed for the next step. V(vt) is waited
  // for inside the turn, after S(kt) is issued: K(kt) alone gates the turn, and the tensor pipe
  // has S(kt) to run while V(vt) lands (FA4's order; bench/NOTES-prefill.md has the A/B).
  // kt and vt count ring tiles; `k_landed()` and `v_landed()` run once K(kt), resp. V(vt), has
  // landed (a gathered tile's proxy fence), `issue_s()` issues S(kt) (the schedule knows Q's
  // slot), `scores_done()` runs once S(kt) is complete (the walk hands Q's slot back after an
  // item's last S), and
  // `softmax_s(between)` masks and exponentiates S(kt) into `correction` (the schedule knows S's
  // key tile), running `between(correction of the first row)` where kPvWait says.
  template <class RingT, class VBufT, class KLanded, class VLanded, class IssueS, class ScoresDone, class SoftmaxS>
  __device__ static void steady_tile(const RingT& kring, const RingT& vring, int kt, int vt, int consumer,
                                     PBuf& pbuf, OBuf& out, PFrag& packed, VBufT& vbuf, float (&correction)[1][2],
                                     KLanded k_landed, VLanded v_landed, IssueS issue_s, ScoresDone scores_done,
                                     SoftmaxS softmax_s) {
    SFrag& s = reinterpret_cast<SFrag&>(pbuf.s);  // the wgmma views of P's and O's registers
    OFrag& o = reinterpret_cast<OFrag&>(out.o);
    kring.wait(kt);
    k_landed();
    take_turn(consumer);
    fence_operands(s, o, packed);
    issue_s();
    vring.wait(vt);
    v_landed();
    issue_pv(o, packed, vbuf, RingT::stage(vt));
    pass_turn(consumer, false);
    sm90::wgmma_wait_group<1>();  // S(kt) done; O += P V(vt) may still run
    kring.release(kt);
    scores_done();
    // The wait for O += P V(vt) inside S's softmax, where kPvWait says (FA4's is inside its
    // softmax too): what comes before it runs under the product. ptxas moves a wait to the top of
    // its scheduling block (here the top of the whole softmax, where the warp idled until the
    // product was done), so a branch that is never taken (the correction is an exponential, >= 0
    // or NaN) ends the block before it. (After the whole softmax, P V's operands stay live
    // through all of it, and D 256 spills.)
    softmax_s([&](float first_correction) {
      sm90::end_schedule_block(first_correction < 0.0f);
      wait_pv<0>(o, packed);
    });
    vring.release(vt);
    if (kMaxSlackLog2 == 0 || Softmax::any_moved(correction)) Softmax::rescale(out, correction);
    pbuf.pack(packed);
  }

  // An item's first tile, the other step both schedules share: no P V is pending and O is
  // zero. Its S in a turn of its own (`issue_s()`), then, once it is complete, `scores_done()`
  // and its softmax (`softmax_s(NoHook{})`: no rescale) and P(kt) packed. The two halves are apart
  // because the persistent walk puts an item's epilogue between them where one Q slot makes
  // the next item's S wait for it (prefill_sm90_persistent.cuh).
  template <class IssueS>
  __device__ static void first_scores_issue(int consumer, PBuf& pbuf, OBuf& out, PFrag& packed, IssueS issue_s) {
    take_turn(consumer);
    fence_operands(reinterpret_cast<SFrag&>(pbuf.s), reinterpret_cast<OFrag&>(out.o), packed);
    issue_s();
    pass_turn(consumer, false);
  }
  template <class RingT, class ScoresDone, class SoftmaxS>
  __device__ static void first_scores_finish(const RingT& kring, int kt, PBuf& pbuf, PFrag& packed,
                                             ScoresDone scores_done, SoftmaxS softmax_s) {
    sm90::wgmma_wait_group<0>();
    kring.release(kt);
    scores_done();
    softmax_s(NoHook{});
    pbuf.pack(packed);
  }
  // Both halves, once `wait_operands()` has returned (Q and K(kt) readable by wgmma).
  template <class RingT, class WaitOperands, class IssueS, class ScoresDone, class SoftmaxS>
  __device__ static void first_tile(const RingT& kring, int kt, int consumer, PBuf& pbuf, OBuf& out, PFrag& packed,
                                    WaitOperands wait_operands, IssueS issue_s, ScoresDone scores_done,
                                    SoftmaxS softmax_s) {
    wait_operands();
    first_scores_issue(consumer, pbuf, out, packed, issue_s);
    first_scores_finish(kring, kt, pbuf, packed, scores_done, softmax_s);
  }
  // A consumer's last step: O += P V(vt) of its last tile in its last turn, waited for.
  // `before_issue()` runs once V(vt) has landed (a gathered tile's proxy fence).
  template <class RingT, class VBufT, class BeforeIssue>
  __device__ static void last_pv(const RingT& vring, int vt, int consumer, OBuf& out, PBuf& pbuf, PFrag& packed,
                                 VBufT& vbuf, BeforeIssue before_issue) {
    OFrag& o = reinterpret_cast<OFrag&>(out.o);
    vring.wait(vt);
    before_issue();
    take_turn(consumer);
    fence_operands(reinterpret_cast<SFrag&>(pbuf.s), o, packed);
    issue_pv(o, packed, vbuf, RingT::stage(vt));
    pass_turn(consumer, true);
    wait_pv<0>(o, packed);
    vring.release(vt);
  }

  // A consumer whose 64 rows all lie past its item's query rows (the last block of a sequence
  // whose length is no multiple of the block's rows): the item's num_tiles tiles with no product
  // and no softmax, in the same waits, releases and issue turns as first_tile, steady_tile and
  // last_pv, so that the rings' stages and the turns pass as if it computed. The consumers with
  // rows then have the tensor pipe and the XU to themselves, and their tiles run shorter
  // (bench/NOTES-prefill.md measured a consumer's tile with the other one idle).
  template <class RingT>
  __device__ static void pace_tiles(const RingT& kring, const RingT& vring, int num_tiles, int consumer) {
    grant_first_turn(consumer);  // the last consumer grants it, with rows or not
    kring.wait(0);
    take_turn(consumer);
    pass_turn(consumer, false);
    kring.release(0);
    for (int i = 1; i < num_tiles; ++i) {
      kring.wait(i);
      take_turn(consumer);
      vring.wait(i - 1);
      pass_turn(consumer, false);
      kring.release(i);
      vring.release(i - 1);
    }
    vring.wait(num_tiles - 1);
    take_turn(consumer);
    pass_turn(consumer, true);
    vring.release(num_tiles - 1);
  }

  // The epilogue by TMA: this consumer's O rows staged over its own rows of `smem_tile` (Q's
  // slab layout; its S products must be done with them), then one thread stores them, a box
  // per slab (the map clips rows past seqlen_q). The generic-proxy writes of every thread are
  // fenced to the async proxy before the barrier that hands them over. Returns on every
  // thread; thread 0 of the warpgroup once the boxes have been read. By default all of O over
  // the consumer's rows of an OTile; a Tile of fewer columns takes the fragments `o` of O's
  // columns from `col`, its rows from `first_row` (the persistent grid's O apart from Q).
  template <class Tile = OTile, int OTiles = Dv / WGO::kFragN, class WarpgroupSync>
  __device__ static void store_output_tma(const float (&o)[1][OTiles][4], In* smem_tile, const PrefillTmaMaps& maps,
                                          const PrefillBlock& b, int consumer, int consumer_thread,
                                          WarpgroupSync warpgroup_sync, int first_row, int col = 0) {
    stage_output<Tile, WGO>(o, smem_tile, first_row + consumer_thread % 128 / 32 * 16, consumer_thread % 32);
    sm90::fence_proxy_async_shared();
    warpgroup_sync();
    if (consumer_thread % 128 == 0 && consumer * 64 < b.rows_q) {
      store_slab_rows_tma<Tile, 64>(smem_tile, first_row, &maps.o, b.m0 + consumer * 64, b.head, b.batch, col);
    }
  }

  // Producer side: an item's Q into `smem` by cp.async from every producer thread (where TMA
  // cannot describe it; packed GQA rows or plain ones), its arrival on `full` once they land.
  __device__ __forceinline__ static void load_q_async(In* smem, const PrefillBlock& blk, const PrefillParams& p,
                                                      std::uint64_t* full) {
    if (blk.pack_shift != 0) {
      load_tile_async_packed<QTile, kProducerThreads>(smem, blk.q_ptr<In>(p), p.q_row_stride, p.q_head_stride,
                                                      blk.pack_shift, blk.rows_q);
    } else {
      load_tile_async<QTile, kProducerThreads>(smem, blk.q_ptr<In>(p), p.q_row_stride, blk.rows_q);
    }
    sm90::cp_async_mbarrier_arrive_noinc(full);
  }
  // Of an item's num_tiles key tiles from n_first, those TMA copies: all, or where the K/V maps'
  // rows go on past a sequence (gather_tail) those wholly inside it; the last tile, reaching past
  // seqlen_k, is gathered with cp.async (its rows past the end zero-filled: they belong to no key
  // of this sequence, and garbage times P = 0 would still be NaN).
  __device__ __forceinline__ static int tiles_by_tma(const PrefillBlock& blk, int n_first, int num_tiles,
                                                     bool gather_tail) {
    return gather_tail ? max(0, min(num_tiles, blk.seqlen_k / kBN - n_first)) : num_tiles;
  }
  // Producer side: K(t) and V(t) of the key tile from key0 (of a sequence of seqlen_k keys),
  // copied by every producer thread, each after its ring stage is free; after_k / after_v close
  // the copies (a cp.async group, or its arrival on the ring).
  template <class RingT, class KBufT, class VBufT, class AfterK, class AfterV>
  __device__ __forceinline__ static void gather_tile(const RingT& kring, const RingT& vring, KBufT& kbuf, VBufT& vbuf,
                                                     int t, int key0, int seqlen_k, AfterK after_k, AfterV after_v) {
    kbuf.write_to_stage(RingT::stage(t));
    vbuf.write_to_stage(RingT::stage(t));
    kring.acquire(t);
    kbuf.load_from_dram(key0, seqlen_k - key0);
    after_k();
    vring.acquire(t);
    vbuf.load_from_dram(key0, seqlen_k - key0);
    after_v();
  }
  // A TMA ring's key tile `key_tile` (ring tile t) that reaches past its sequence's end
  // (maps.gather_tail), gathered by every producer thread into rings whose full barriers expect
  // one arrival: each thread waits for its own copies, the warpgroup syncs, then thread 0
  // arrives (its release covers the others' writes, ordered before it by the named barrier). K
  // and V are both in flight before the first wait. The first sync is required: threads 0 and 32
  // have acquired tile t - 1 of their rings by then, so tile t's empty barriers are at most one
  // phase behind the others' parity wait (without it, a thread could see one two phases behind
  // and pass the wait wrongly).
  // FenceByProducer: each thread fences its landed copies to the async proxy before the arrival
  // that hands them to wgmma (the persistent walk, whose steady tiles have no fence); otherwise
  // the consumers fence a gathered tile before reading it.
  template <bool FenceByProducer, class RingT, class KBufT, class VBufT>
  __device__ __forceinline__ static void gather_tail_tile(const RingT& kring, const RingT& vring, KBufT& kbuf,
                                                          VBufT& vbuf, int t, int key_tile, int seqlen_k) {
    sm90::named_barrier_sync(kProducerSync, kProducerThreads);
    gather_tile(kring, vring, kbuf, vbuf, t, key_tile * kBN, seqlen_k, sm80::cp_async_commit_group,
                sm80::cp_async_commit_group);
    sm80::cp_async_wait_group<1>();  // this thread's K copies landed
    if constexpr (FenceByProducer) sm90::fence_proxy_async_shared();
    sm90::named_barrier_sync(kProducerSync, kProducerThreads);
    if (threadIdx.x == 0) kring.arrive_full(t);
    sm80::cp_async_wait_group<0>();
    if constexpr (FenceByProducer) sm90::fence_proxy_async_shared();
    sm90::named_barrier_sync(kProducerSync, kProducerThreads);
    if (threadIdx.x == 0) vring.arrive_full(t);
  }

  __device__ static void run(const PrefillParams& p, const PrefillTmaMaps& maps, char* smem_raw) {
#ifdef FLASHBUF_NO_WGMMA
    __trap();  // never launched on a device pass without wgmma (see arch/sm90/target.cuh)
#else
    FLASHBUF_TRACE_STEP(threadIdx.x == 0, flashbuf_trace_block_start());
    const PrefillBlock blk = PrefillBlock::make<!Paged>(p, kBM);
    FLASHBUF_TRACE_STEP(threadIdx.x == 0, flashbuf_trace_block_found(blk.keys.end));
    if (blk.empty()) return;

    char* smem = reinterpret_cast<char*>(round_up(reinterpret_cast<std::uintptr_t>(smem_raw), std::uintptr_t(kAlign)));
    In* smem_q = reinterpret_cast<In*>(smem);
    KBuf kbuf;
    VBuf vbuf;
    kbuf.smem = reinterpret_cast<In*>(smem + kQBytes);
    vbuf.smem = reinterpret_cast<In*>(smem + kQBytes + KBuf::kSmemBytes);
    auto* barriers = reinterpret_cast<std::uint64_t*>(smem + kQBytes + KBuf::kSmemBytes + VBuf::kSmemBytes);
    std::uint64_t* q_full = barriers;
    const bool use_tma = maps.enabled;  // every form but pages the box rule leaves to the gather
    const int copiers = use_tma ? 1 : kProducerThreads;
    Ring kring, vring;
    kring.init(barriers + 1, copiers, kConsumerThreads / 32);
    vring.init(barriers + 1 + 2 * kStages, copiers, kConsumerThreads / 32);

    const int num_tiles = blk.keys.tiles(kBN);
    const int n_first = blk.keys.first_tile(kBN);
    // (0 without TMA: every tile is a cp.async gather, and the consumers fence each.)
    const int tma_tiles = use_tma ? tiles_by_tma(blk, n_first, num_tiles, maps.gather_tail) : 0;
    // Tile i goes into stage Ring::stage(i) of each buffer. The stage is set from i rather than
    // left to the buffers' own cycling count (the same stages): a loop-carried modulo spills at
    // 40 registers.
    // Paged tiles of more than four boxes (pages below 64 rows at D 128) go out over two
    // producer warps a lane a box; tiles of a few large boxes from one thread, where whole warps
    // measured 2-3% slower (pages of 128 rows; bench/NOTES-prefill.md, "Paged pages of 16 rows").
    const bool lane_boxes = Paged && maps.box_rows > 0 && kBN / maps.box_rows * KTile::kSlabs > 4;
    const auto issue_tile_tma = [&](const Ring& ring, auto& buf, const CUtensorMap* map, std::uint32_t bytes, int i) {
      const int key0 = (n_first + i) * kBN;
      buf.write_to_stage(Ring::stage(i));
      ring.acquire(i);
      if constexpr (Paged) {
        if (lane_boxes) {  // by two warps (K: 0 and 2, V: 1 and 3), a lane a box
          const int lane = threadIdx.x % 32 * 2 + threadIdx.x / 64;  // the warps take alternate boxes
          if (lane == 0) ring.expect_bytes(i, bytes);
          __syncwarp();
          buf.load_tile_tma_paged_by_lanes(map, key0, blk.head_kv, &ring.full[Ring::stage(i)], maps.box_rows, lane,
                                           64);
        } else {
          buf.load_tile_tma_paged(map, key0, blk.head_kv, ring.expect_bytes(i, bytes), maps.box_rows);
        }
      } else {
        // Varlen: one packed sequence of rows (batch 0), this sequence from k_begin.
        const int row = blk.k_begin + key0, batch = p.cu_seqlens_k ? 0 : blk.batch;
        buf.load_tile_tma(map, row, blk.head_kv, batch, ring.expect_bytes(i, bytes));
      }
    };

    // Q by TMA, and K(0) and V(0) where TMA copies them from a tensor, go in flight before the
    // block's barrier: thread 0 initialised their barriers and fenced them to the async proxy,
    // so its copies may complete on them at once. (Issued after the barrier, the first copies
    // also waited for every warp of the block and the producer's register release, on every
    // item's path to its first product: bench/NOTES-prefill.md, "An item's fixed cost, step by
    // step".) Paged tiles wait for the barrier: their page-table reads there cost the D 256
    // kernel spills.
    constexpr int kEarlyTiles = Paged ? 0 : 1;
    if (threadIdx.x == 0) {
      sm90::mbarrier_init(q_full, maps.q_enabled ? 1 : kProducerThreads);
      sm90::fence_mbarrier_init();  // the TMA unit completes transactions on these barriers
      FLASHBUF_TRACE_STEP(true, flashbuf_trace_barriers_initialised());
      if (maps.q_enabled && num_tiles > 0) {
        QBuf::load_tile_tma(smem_q, &maps.q, blk.m0, blk.head, blk.batch, q_full);
        FLASHBUF_TRACE_STEP(true, flashbuf_trace_q_issued());
      }
      if constexpr (kEarlyTiles > 0) {
        for (int i = 0; i < min(kEarlyTiles, tma_tiles); ++i) {
          issue_tile_tma(kring, kbuf, &maps.k, KTile::kBytes, i);
          issue_tile_tma(vring, vbuf, &maps.v, VTile::kBytes, i);
        }
      }
    }
    __syncthreads();  // barriers initialised before anyone else arrives or waits
    FLASHBUF_TRACE_STEP(threadIdx.x == 0, flashbuf_trace_barriers_ready());

    if (threadIdx.x < kProducerThreads) {
      sm90::setmaxnreg_dec<kProducerRegisters>();
      if (num_tiles == 0) return;  // no keys: the consumers write O = 0 without Q
      blk.bind_kv<In, Paged>(kbuf, vbuf, p);
      // Q by TMA: issued above. By cp.async (varlen), from the whole warpgroup.
      if (!maps.q_enabled) load_q_async(smem_q, blk, p, q_full);
      // TMA: one thread per operand issues whole tiles (K from warp 0, V from warp 1; the early
      // tiles of both came from thread 0 above), so neither operand's boxes wait behind the
      // other's; paged tiles of many boxes from two whole warps each (page 16 at D 128: 16 boxes
      // a tile each, a lane each).
      const auto issue_tma = [&](const Ring& ring, auto& buf, const CUtensorMap* map, std::uint32_t bytes) {
        for (int i = kEarlyTiles; i < tma_tiles; ++i) issue_tile_tma(ring, buf, map, bytes, i);
      };
      if (!use_tma) {
        for (int i = 0; i < num_tiles; ++i) {
          gather_tile(kring, vring, kbuf, vbuf, i, (n_first + i) * kBN, blk.seqlen_k, [&] { kring.commit_cp_async(i); },
                      [&] { vring.commit_cp_async(i); });
        }
      } else {
        const int issuer = lane_boxes ? threadIdx.x / 32 % 2 * 32 : threadIdx.x;  // two warps, or one lane
        if (issuer == 0) issue_tma(kring, kbuf, &maps.k, KTile::kBytes);
        if (issuer == 32) issue_tma(vring, vbuf, &maps.v, VTile::kBytes);
        for (int i = tma_tiles; i < num_tiles; ++i) {  // the last tile, past the sequence's end
          gather_tail_tile<false>(kring, vring, kbuf, vbuf, i, n_first + i, blk.seqlen_k);
        }
      }
      sm80::cp_async_wait_all();  // leave no copy of this thread in flight at exit
      return;
    }

    sm90::setmaxnreg_inc<kConsumerRegisters>();
    const int consumer_thread = threadIdx.x - kProducerThreads;
    const ConsumerWarp cw = consumer_warp(consumer_thread);
    const int consumer = cw.consumer, warp_row0 = cw.warp_row0;
    QBuf qbuf;
    qbuf.smem = smem_q;
    qbuf.first_row = consumer * 64;

    OBuf out;
    out.zero();
    Softmax softmax;
    softmax.init();

    if (kConsumers > 1 && num_tiles > 0 && consumer * 64 >= blk.rows_q) {
      // No rows: O stays 0, and no row of it is stored. Q's landing is waited for all the same:
      // the epilogue stages O over this consumer's Q rows, which the producer's copies write.
      sm90::mbarrier_wait_parity(q_full, 0);
      pace_tiles(kring, vring, num_tiles, consumer);
    } else if (num_tiles > 0) {
      PBuf pbuf;                     // S(i), exponentiated in place
      typename PBuf::Packed packed;  // P(i - 1) as the A fragments of O += P V
      grant_first_turn(consumer);
      const auto issue_scores = [&](int i) {
        PrefillSm90::issue_scores(reinterpret_cast<SFrag&>(pbuf.s), qbuf, kbuf, Ring::stage(i));
      };
      const TileSpan unmasked = unmasked_tiles(blk.mask, blk.m0 + warp_row0);
      float correction[1][2];
      const auto softmax_scores = [&](int i, auto softcap, auto between, auto unmasked_span) {
        PrefillSm90::softmax_scores(pbuf, softmax, p, blk.mask, blk.m0 + warp_row0, n_first + i, unmasked_span,
                                    correction, softcap, between);
      };
      // A tile copied by cp.async (every tile i >= tma_tiles) is fenced to the async proxy
      // before wgmma reads it; TMA writes through that proxy already.
      const auto fence_gathered = [&](int i) {
        if (i >= tma_tiles) sm90::fence_proxy_async_shared();
      };

      first_tile(
          kring, 0, consumer, pbuf, out, packed,
          [&] {
            sm90::mbarrier_wait_parity(q_full, 0);
            kring.wait(0);
            sm90::fence_proxy_async_shared();  // cp.async may have written Q and K(0)
            FLASHBUF_TRACE_STEP(consumer_thread == 0, flashbuf_trace_operands_ready());
          },
          [&] { issue_scores(0); }, [] {},
          [&](auto between) { softmax_scores(0, p.softcap_inv > 0.0f, between, unmasked); });
      FLASHBUF_TRACE_STEP(consumer_thread % 128 == 0, flashbuf_trace_first_tile_done());
      // Uncapped, the tiles from 1 that TMA wrote and that every row of this warpgroup sees whole
      // need neither a fence nor the mask: they run in a loop of their own, so that the steady
      // tile neither tests each tile's source at both waits (a uniform compare, a move to a
      // branch predicate, a branch) nor branches over the mask's code from S's wait. The span is
      // the warpgroup's (within each of its warps' `unmasked`), so its warps leave the loop
      // together, as their wgmma must. (Capped too, ptxas spilled for a fourth copy of the
      // steady tile.)
      const TileSpan group_unmasked = unmasked_tiles(blk.mask, blk.m0 + consumer * 64, 64);
      const int plain_end = group_unmasked.contains(n_first + 1) ? min(tma_tiles, group_unmasked.end - n_first) : 0;
      // The trace unit's per-tile stamps (bench/tile_overlap.py): K(i) landed, S(i) done (the
      // softmax starts), the tile's softmax done (its row sum, which every exponential feeds).
      const auto k_stamp = [&](int i) { FLASHBUF_TRACE_STEP(true, flashbuf_trace_tile(consumer, i, 0, 0.0f)); };
      const auto s_stamp = [&](int i) { FLASHBUF_TRACE_STEP(true, flashbuf_trace_tile(consumer, i, 1, pbuf.s[0][0][0])); };
      const auto end_stamp = [&](int i) {
        FLASHBUF_TRACE_STEP(true, flashbuf_trace_tile(consumer, i, 2, softmax.row_sum[0][0]));
      };
      soft_capped(p, [&](auto softcap) {
        int i = 1;
        for (; std::is_same_v<decltype(softcap), std::false_type> && i < plain_end; ++i) {
          steady_tile(
              kring, vring, i, i - 1, consumer, pbuf, out, packed, vbuf, correction, [&] { k_stamp(i); }, [] {},
              [&] { issue_scores(i); }, [&] { s_stamp(i); },
              [&](auto between) { softmax_scores(i, softcap, between, EveryTile{}); });
          end_stamp(i);
        }
        for (; i < num_tiles; ++i) {
          steady_tile(
              kring, vring, i, i - 1, consumer, pbuf, out, packed, vbuf, correction,
              [&] {
                fence_gathered(i);
                k_stamp(i);
              },
              [&] { fence_gathered(i - 1); }, [&] { issue_scores(i); }, [&] { s_stamp(i); },
              [&](auto between) { softmax_scores(i, softcap, between, unmasked); });
          end_stamp(i);
        }
      });
      last_pv(vring, num_tiles - 1, consumer, out, pbuf, packed, vbuf, [&] { fence_gathered(num_tiles - 1); });
      FLASHBUF_TRACE_STEP(consumer_thread % 128 == 0, flashbuf_trace_last_product());
    }

    // The block again for the epilogue (the same one: blockIdx and an order table the kernel
    // does not write), so its coordinates and lengths are re-read here rather than held in
    // registers over the main loop, where at D 256 they made ptxas spill (bench/NOTES-prefill.md).
    const PrefillBlock eblk = PrefillBlock::make<!Paged>(p, kBM);
    finalize_rows(softmax, out, p, eblk, warp_row0);
    const auto warpgroup_sync = [consumer] { sm90::named_barrier_sync(kEpilogue0 + consumer, 128); };
    warpgroup_sync();  // this consumer's wgmma are done with its Q rows: they take its O
    FLASHBUF_TRACE_STEP(consumer_thread % 128 == 0, flashbuf_trace_output_final());
    if (maps.o_enabled) {
      store_output_tma(out.o, smem_q, maps, eblk, consumer, consumer_thread, warpgroup_sync, consumer * 64);
    } else if (eblk.pack_shift != 0) {
      store_output_packed<OTile, WGO, 128, 64>(out.o, smem_q, warp_row0, eblk.o_ptr<In>(p), p.o_row_stride,
                                               p.o_head_stride, eblk.pack_shift, eblk.rows_q, consumer_thread % 128,
                                               warpgroup_sync, consumer * 64);
    } else {
      store_output<OTile, WGO, 128, 64>(out.o, smem_q, warp_row0, eblk.o_ptr<In>(p), p.o_row_stride, eblk.rows_q,
                                       consumer_thread % 128, warpgroup_sync, consumer * 64);
    }
    FLASHBUF_TRACE_STEP(consumer_thread % 128 == 0,
                        flashbuf_trace_block_end(eblk.m_block, eblk.head + 1024 * eblk.batch, num_tiles));
#endif
  }
};

template <class In, int D, int Dv, bool Paged, int Consumers = prefill_sm90_tile(D, Dv).consumers,
          int BlockN = prefill_sm90_tile(D, Dv).block_n>
__global__ void __launch_bounds__(PrefillSm90<In, D, Dv, Paged, Consumers, BlockN>::kThreads,
                                  PrefillSm90<In, D, Dv, Paged, Consumers, BlockN>::kCtasPerSm)
    prefill_sm90_kernel(const __grid_constant__ PrefillParams params, const __grid_constant__ PrefillTmaMaps maps) {
  extern __shared__ __align__(128) char smem[];
  PrefillSm90<In, D, Dv, Paged, Consumers, BlockN>::run(params, maps, smem);
}

}  // namespace flashbuf
