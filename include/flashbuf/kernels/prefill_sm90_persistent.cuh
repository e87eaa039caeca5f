// kernels: the Hopper prefill kernel on a persistent grid, for batch-form Q, K, V and O (the
// TMA forms of every buffer), (Varlen) a self-attention varlen batch, or (Cache) batch-form Q
// and O over a K/V cache: paged, or batch-form with each sequence's length on the device
// (seqlens_k). The same buffers, warpgroups and issue turns as PrefillSm90 (prefill_sm90.cuh,
// whose header describes them); what differs is the schedule.
// Short sequences spend most of a block's time outside the steady tiles (kernel entry, waiting
// for Q and K(0), the first S and softmax alone, the epilogue; bench/NOTES-prefill.md,
// "Measurements behind the code's choices"); here a grid of one wave of blocks walks the items
// (query block, head, sequence; WorkItems) and each consumer's tiles run as one stream across them:
//
//   steady tile          issue S(t) and O += P(t-1) V(t-1); softmax S(t); rescale O
//   first tile of item   issue O += P(t-1) V(t-1) (the last of the previous item), then S(t);
//                        wait for the P V; the previous item's epilogue (O / l, LSE, O staged
//                        over its Q rows, TMA store) runs while S(t) is on the tensor cores;
//                        then O = 0 and the softmax of S(t)
//
// Q has two slots where they leave two K+V stages (every head dim but 256): item r's Q lands
// in slot r % 2 (from the K-issuing thread, ahead of its K tiles) while item r - 1 computes,
// and the slot of item r - 1 holds its staged O until the store has read it, then goes back to
// the producer (q_empty, one arrival per consumer). D 256 has one slot, and O is staged apart
// from it (the shared memory two K+V stages leave holds each consumer's 64 rows of 128 columns
// of O, stored in two passes): the slot goes back to the producer once the item's last S is
// done (one arrival per consumer warp), so item r + 1's Q loads under item r's last softmax,
// P V and epilogue, where staging O over Q made its first S wait for the epilogue, the store
// and then the Q load. The K and V rings count tiles over all items, so the next item's first
// tiles load under the current one's last. The Q slots cost K+V stages (D 128: two,
// PrefillSm90 three) and the static walk cannot balance long causal items, so the launcher
// takes this grid where items are short, and at D 64 where a block per item has one consumer
// (persistent_grid_pays, core/work_items.hpp).
// Varlen: a skewed batch's items are its longest-first order table's (core/work_order.hpp: the
// walk takes them in rank order, so the heaviest go first), a batch of like lengths walks the
// grid's numbering (a head's query blocks together, for the L2); Q comes by TMA over the packed
// rows (GQA-packed rows through a view whose boxes lay them out in order; by cp.async from every
// producer thread where TMA cannot describe it), O by TMA stores for a block inside its
// sequence and row copies for a sequence's last block (its box would run into the next
// sequence), and a key tile that reaches past its sequence's end is gathered by every producer
// thread, as the block per item gathers it. The launcher takes this walk for batches of short
// sequences whose queries are their keys (one cu_seqlens), so that every item has keys.
// Cache: each item's tiles come by TMA, from a paged cache in boxes inside its sequence's pages
// (a tile of many small boxes from two producer warps an operand, a lane a box, as the block
// per item issues them), and the tile that reaches past a sequence's end is gathered by every
// producer thread (the rows after it are other pages' or unused). Lengths may be the device's
// (seqlens_k), so an item may hold rows that see no key at all: such an item walks one tile of
// its sequence that the mask hides from every row (its first: by TMA where the sequence fills
// it, else gathered, keys past the end as zeros), and so writes O = 0 and its LSE as a block per
// item does.
#pragma once

#include <type_traits>

#include "flashbuf/core/work_items.hpp"
#include "flashbuf/kernels/prefill_sm90.cuh"

namespace flashbuf {

// Consumers and the key tile: the tile table's (prefill_sm90_tile(D, Dv, true),
// kernels/prefill_tiles.hpp).
template <class In, int D, int Dv, bool Varlen = false, bool Cache = false>
struct PrefillSm90Persistent {
  static_assert(!(Varlen && Cache), "prefill_sm90_persistent: a varlen batch over a cache keeps a block per item");
  static constexpr PrefillSm90Tile kTile = prefill_sm90_tile(D, Dv, true);
  // (Base's steps do not depend on the K/V form; its own run, which does, is not used here.)
  using Base = PrefillSm90<In, D, Dv, false, kTile.consumers, kTile.block_n>;
  static constexpr int kConsumers = Base::kConsumers;
  static constexpr int kCtasPerSm = Base::kCtasPerSm;
  static constexpr int kBM = Base::kBM;
  static constexpr int kBN = Base::kBN;
  static constexpr int kProducerThreads = Base::kProducerThreads;
  static constexpr int kConsumerThreads = Base::kConsumerThreads;
  static constexpr int kThreads = Base::kThreads;
  static constexpr int kAlign = Base::kAlign;
  using WGS = typename Base::WGS;
  using WGO = typename Base::WGO;
  using QBuf = typename Base::QBuf;
  using KTile = typename Base::KTile;
  using VTile = typename Base::VTile;
  using OTile = typename Base::OTile;
  using PBuf = typename Base::PBuf;
  using OBuf = typename Base::OBuf;
  using Softmax = typename Base::Softmax;

  static constexpr int kQSlotBytes = Base::kQBytes;  // Q, or the item's staged O over it
  static constexpr int kKVStageBytes = KTile::kBytes + VTile::kBytes;
  static constexpr int kQSlots = prefill_sm90_stages(2 * kQSlotBytes, kKVStageBytes, kCtasPerSm) >= 2 ? 2 : 1;
  // One slot: O staged apart, a pass of kOPassCols columns at a time per consumer.
  static constexpr bool kOApart = kQSlots == 1;
  static constexpr int kOPassCols = 128;
  using OPassTile = SlabTile<64, kOPassCols>;
  static_assert(!kOApart || Dv % kOPassCols == 0, "prefill_sm90_persistent: O passes of whole 128 columns");
  static constexpr int kOApartBytes = kOApart ? kConsumers * OPassTile::kBytes : 0;
  static constexpr int kStages = prefill_sm90_stages(kQSlots * kQSlotBytes + kOApartBytes, kKVStageBytes, kCtasPerSm);
  static_assert(kStages >= 2, "prefill_sm90_persistent: shared memory must hold two K+V stages beside a Q slot");

  using KBuf = KVBufferLDSSm90<KBufferConfig<kBN, D, kBN>, WGS, kProducerThreads, kStages>;
  using VBuf = KVBufferLDSSm90<VBufferConfig<kBN, kBN, Dv, Dv>, WGO, kProducerThreads, kStages>;
  using Ring = StageRing<kStages>;
  static_assert(std::is_same_v<typename KBuf::Tile, KTile> && std::is_same_v<typename VBuf::Tile, VTile>);

  // Shared memory: [Q slots][O apart][K stages][V stages][barriers: Q full and Q empty per
  // slot, rings].
  static constexpr int kQBytes = kQSlots * kQSlotBytes + kOApartBytes;
  static constexpr int kBarrierBytes = 2 * kQSlots * sizeof(std::uint64_t) + 2 * Ring::kBarrierBytes;
  static constexpr int kSmemBytes = kAlign + kQBytes + KBuf::kSmemBytes + VBuf::kSmemBytes + kBarrierBytes;
  static_assert(kSmemBytes <= prefill_sm90_smem_budget(kCtasPerSm),
                "prefill_sm90_persistent: over the shared memory a block may use at kCtasPerSm blocks per SM");

  // Item `item` of the walk: in the walk's numbering (item_coords), or a skewed varlen batch's
  // from its longest-first order table (p.item_order).
  __device__ static PrefillBlock walk_item(const PrefillParams& p, int item) {
    if constexpr (Varlen) {
      if (p.item_order != nullptr) return PrefillBlock::make_ordered_item(p, kBM, item, p.pack_shift);
      return PrefillBlock::make_item(p, kBM, item, p.pack_shift);
    }
    return PrefillBlock::make_item(p, kBM, item);
  }
  // An item's key tiles, [first, first + count): a cache's item whose rows see no key walks tile
  // 0 (see above), which the mask hides whole. Producer and consumers count alike.
  struct ItemTiles {
    int first, count;
  };
  __device__ static ItemTiles item_tiles(const PrefillBlock& b) {
    const int count = b.keys.tiles(kBN);
    if (Cache && count == 0) return {0, 1};
    return {b.keys.first_tile(kBN), count};
  }
  // The walk's next item with keys from position w on (w moved to it); false where the block's
  // walk ends. The producer and the consumers skip alike. Batch-form items are never empty and
  // the launcher's rules give every item keys (batch form: seqlen_q <= seqlen_k; varlen: one
  // cu_seqlens for Q and K/V) but under a cache's device lengths, where item_tiles gives a
  // keyless item its masked tile. A varlen batch's walk numbering (max_seqlen_q's query blocks for
  // every sequence) holds empty items past its shorter sequences' ends, skipped here; past an
  // order table's count every later item of the walk is past it too.
  __device__ static bool next_item(const PrefillParams& p, const WorkItems& items, int& w) {
    if constexpr (!Varlen) {
      return items.at(w) >= 0;
    } else {
      for (;; ++w) {
        const int item = items.at(w);
        if (item < 0) return false;
        if (p.item_order != nullptr && item / (p.heads_q >> p.pack_shift) >= p.item_order[0]) return false;
        const PrefillBlock b = walk_item(p, item);
        if (!b.empty() && b.keys.tiles(kBN) > 0) return true;
      }
    }
  }

  __device__ static void run(const PrefillParams& p, const PrefillTmaMaps& maps, char* smem_raw) {
#ifdef FLASHBUF_NO_WGMMA
    __trap();
#else
    char* smem = reinterpret_cast<char*>(round_up(reinterpret_cast<std::uintptr_t>(smem_raw), std::uintptr_t(kAlign)));
    const auto q_slot = [smem](int slot) { return reinterpret_cast<In*>(smem + slot * kQSlotBytes); };
    In* o_apart = reinterpret_cast<In*>(smem + kQSlots * kQSlotBytes);  // [consumer] OPassTile
    KBuf kbuf;
    VBuf vbuf;
    kbuf.smem = reinterpret_cast<In*>(smem + kQBytes);
    vbuf.smem = reinterpret_cast<In*>(smem + kQBytes + KBuf::kSmemBytes);
    auto* barriers = reinterpret_cast<std::uint64_t*>(smem + kQBytes + KBuf::kSmemBytes + VBuf::kSmemBytes);
    std::uint64_t* q_full = barriers;             // [slot]: the slot's Q landed
    std::uint64_t* q_empty = barriers + kQSlots;  // [slot]: Q is read (O apart) or its O stored
    Ring kring, vring;
    kring.init(barriers + 2 * kQSlots, 1, kConsumerThreads / 32);
    vring.init(barriers + 2 * kQSlots + 2 * kStages, 1, kConsumerThreads / 32);
    // A varlen batch gathers the key tiles that reach past a sequence's end with every producer
    // thread. Its Q comes by TMA over the packed rows (rows past a sequence's end belong to the
    // next one or arrive as zeros: masked either way, and never stored; GQA-packed rows through
    // the launcher's packed view), or by cp.async from every producer thread where TMA cannot
    // describe it.
    constexpr bool gather = Varlen || Cache;
    const bool q_async = Varlen && !maps.q_enabled;
    if (threadIdx.x == 0) {
      for (int s = 0; s < kQSlots; ++s) {
        sm90::mbarrier_init(&q_full[s], q_async ? kProducerThreads : 1);
        sm90::mbarrier_init(&q_empty[s], kOApart ? kConsumerThreads / 32 : kConsumers);
      }
      sm90::fence_mbarrier_init();
    }
    __syncthreads();

    // A block may have no item (a varlen batch's order table holds fewer than the grid).
    const WorkItems items{p.num_items, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x)};

    if (threadIdx.x < kProducerThreads) {
      sm90::setmaxnreg_dec<Base::kProducerRegisters>();
      // Thread 0: each item's Q (into its slot once the slot's last O was stored), then its K
      // tiles by TMA; thread 32: the V tiles. A varlen batch's Q comes from every producer
      // thread, and so does a tile that reaches past a sequence's end (gathered as the block per
      // item gathers it: prefill_sm90.cuh); a paged tile of many boxes goes out from warps 0 and
      // 2 (K) and 1 and 3 (V), a lane a box. Every thread counts tiles over all items, as the
      // consumers do, and r over the items with keys (the slots' order).
      if (!gather && threadIdx.x != 0 && threadIdx.x != 32) return;
      // The walk, compiled once for pages and once for rows of a tensor (a cache's form is the
      // launch's), so that neither pays the other's registers in the producer's 40.
      const auto produce = [&](auto paged_kv) {
        constexpr bool paged = decltype(paged_kv)::value;
        const bool lane_boxes = paged && maps.box_rows > 0 && kBN / maps.box_rows * KTile::kSlabs > 4;
        const int issuer = lane_boxes ? static_cast<int>(threadIdx.x) / 32 % 2 * 32 : static_cast<int>(threadIdx.x);
        const bool k_thread = issuer == 0, v_thread = issuer == 32;
        // Pages: tile `tile` of the walk (key0 of its item's sequence) into its stage once that
        // is free, a lane a box or from one thread (prefill_sm90.cuh's rule).
        const auto issue_paged_tile = [&](const Ring& ring, auto& buf, const CUtensorMap* map, std::uint32_t bytes,
                                          int tile, int head_kv, int key0) {
          buf.write_to_stage(Ring::stage(tile));
          ring.acquire(tile);
          if (lane_boxes) {
            const int lane = static_cast<int>(threadIdx.x) % 32 * 2 + static_cast<int>(threadIdx.x) / 64;
            if (lane == 0) ring.expect_bytes(tile, bytes);
            __syncwarp();
            buf.load_tile_tma_paged_by_lanes(map, key0, head_kv, &ring.full[Ring::stage(tile)], maps.box_rows, lane,
                                             64);
          } else {
            buf.load_tile_tma_paged(map, key0, head_kv, ring.expect_bytes(tile, bytes), maps.box_rows);
          }
        };
        int t = 0;
        for (int w = 0, r = 0; next_item(p, items, w); ++w, ++r) {
          const PrefillBlock blk = walk_item(p, items.at(w));
          const int slot = r % kQSlots, use = r / kQSlots;
          if (q_async) {
            if (use > 0) sm90::mbarrier_wait_parity(&q_empty[slot], (use - 1) & 1);
            Base::load_q_async(q_slot(slot), blk, p, &q_full[slot]);
          } else if (threadIdx.x == 0) {
            if (use > 0) sm90::mbarrier_wait_parity(&q_empty[slot], (use - 1) & 1);
            // Varlen: one packed sequence of rows (batch 0), this sequence from q_begin; with packed
            // GQA rows the map's (group head, token, K/V head) view.
            if (Varlen && blk.pack_shift != 0) {
              QBuf::load_tile_tma(q_slot(slot), &maps.q, 0, blk.q_begin + (blk.m0 >> blk.pack_shift),
                                  blk.head >> blk.pack_shift, &q_full[slot]);
            } else {
              QBuf::load_tile_tma(q_slot(slot), &maps.q, blk.q_begin + blk.m0, blk.head, Varlen ? 0 : blk.batch,
                                  &q_full[slot]);
            }
          }
          const ItemTiles tiles = item_tiles(blk);
          const int n_first = tiles.first, num_tiles = tiles.count;
          const int tma_tiles = Base::tiles_by_tma(blk, n_first, num_tiles, gather);
          if constexpr (paged) {
            blk.bind_kv<In, true>(kbuf, vbuf, p);  // the boxes find their pages through it
            for (int i = 0; (k_thread || v_thread) && i < tma_tiles; ++i) {
              const int key0 = (n_first + i) * kBN;
              if (k_thread) {
                issue_paged_tile(kring, kbuf, &maps.k, KTile::kBytes, t + i, blk.head_kv, key0);
              } else {
                issue_paged_tile(vring, vbuf, &maps.v, VTile::kBytes, t + i, blk.head_kv, key0);
              }
            }
          } else {
            // Varlen K/V: one packed sequence of rows (batch 0), this sequence from k_begin.
            const int kv_batch = p.cu_seqlens_k ? 0 : blk.batch;
            for (int i = 0; (k_thread || v_thread) && i < tma_tiles; ++i) {
              const int row = blk.k_begin + (n_first + i) * kBN;
              if (k_thread) {
                kbuf.write_to_stage(Ring::stage(t + i));
                kring.acquire(t + i);
                kbuf.load_tile_tma(&maps.k, row, blk.head_kv, kv_batch, kring.expect_bytes(t + i, KTile::kBytes));
              } else {
                vbuf.write_to_stage(Ring::stage(t + i));
                vring.acquire(t + i);
                vbuf.load_tile_tma(&maps.v, row, blk.head_kv, kv_batch, vring.expect_bytes(t + i, VTile::kBytes));
              }
            }
            if (gather && tma_tiles < num_tiles) blk.bind_kv<In, false>(kbuf, vbuf, p);
          }
          for (int i = tma_tiles; gather && i < num_tiles; ++i) {
            Base::template gather_tail_tile<true>(kring, vring, kbuf, vbuf, t + i, n_first + i, blk.seqlen_k);
          }
          t += num_tiles;
        }
      };
      if constexpr (Cache) {
        if (p.page_table != nullptr) {
          produce(std::true_type{});
        } else {
          produce(std::false_type{});
        }
      } else {
        produce(std::false_type{});
      }
      sm80::cp_async_wait_all();  // leave no copy of this thread in flight at exit
      return;
    }

    sm90::setmaxnreg_inc<Base::kConsumerRegisters>();
    const int consumer_thread = threadIdx.x - kProducerThreads;
    const typename Base::ConsumerWarp cw = Base::consumer_warp(consumer_thread);
    const int consumer = cw.consumer, warp_row0 = cw.warp_row0;
    QBuf qbuf;
    qbuf.first_row = consumer * 64;

    OBuf out;
    out.zero();
    Softmax softmax;
    softmax.init();
    float(&o)[Dv / 2] = reinterpret_cast<float(&)[Dv / 2]>(out.o);
    PBuf pbuf;
    float(&s)[kBN / 2] = reinterpret_cast<float(&)[kBN / 2]>(pbuf.s);
    typename PBuf::Packed packed;  // P(t) as the A fragments of O += P V

    int w = 0;  // walk position (items.at(w)) of the current item
    if (!next_item(p, items, w)) return;  // no item: no turns either (its producer has none)

    // The steps of PrefillSm90's consumers (first_tile, steady_tile, last_pv); one issue turn
    // per tile plus the last P V, over every item alike.
    Base::grant_first_turn(consumer);
    const auto issue_scores = [&](int t, int slot) {
      qbuf.smem = q_slot(slot);
      Base::issue_scores(s, qbuf, kbuf, Ring::stage(t));
    };
    float correction[1][2];
    TileSpan unmasked;  // of the current item (Base::unmasked_tiles)
    const auto softmax_scores = [&](const PrefillBlock& b, int key_tile, auto between) {
      Base::softmax_scores(pbuf, softmax, p, b.mask, b.m0 + warp_row0, key_tile, unmasked, correction,
                           p.softcap_inv > 0.0f, between);
    };
    // Item r's O: normalised, LSE written, stored by TMA over this consumer's Q rows of the
    // item's slot (its S products are done with them); then the slot goes back to the producer.
    // With O apart, each pass stages 128 columns of the consumer's rows and one thread stores
    // them; the barrier before a pass orders it after the last pass's store has read the buffer.
    const auto warpgroup_sync = [consumer] { sm90::named_barrier_sync(Base::kEpilogue0 + consumer, 128); };
    const auto epilogue = [&](const PrefillBlock& b, int slot) {
      finalize_rows(softmax, out, p, b, warp_row0);
      if constexpr (kOApart) {
        In* buf = o_apart + consumer * OPassTile::kElems;
        static_for<Dv / kOPassCols>([&](auto pass) {
          constexpr int kCol0 = decltype(pass)::value * kOPassCols;
          constexpr int kTile0 = kCol0 / WGO::kFragN;
          warpgroup_sync();
          Base::template store_output_tma<OPassTile>(
              reinterpret_cast<const float(&)[1][kOPassCols / WGO::kFragN][4]>(out.o[0][kTile0]), buf, maps, b, consumer,
              consumer_thread, warpgroup_sync, 0, kCol0);
        });
      } else {
        warpgroup_sync();
        if constexpr (!Varlen) {
          Base::store_output_tma(out.o, q_slot(slot), maps, b, consumer, consumer_thread, warpgroup_sync,
                                 consumer * 64);
        } else {
          // Staged over the slot as above; then a block inside its sequence goes out by TMA over
          // the packed rows (batch 0, from the sequence's q_begin; GQA-packed rows through the
          // launcher's view), and a sequence's last block (its box would write into the next
          // sequence), or O that TMA cannot describe, is copied row by row.
          const bool by_tma = maps.o_enabled && b.rows_q == kBM;
          stage_output<OTile, WGO>(out.o, q_slot(slot), warp_row0, consumer_thread % 32);
          sm90::fence_proxy_async_shared();
          warpgroup_sync();
          if (by_tma) {
            if (consumer_thread % 128 == 0) {
              const int row0 = b.m0 + consumer * 64;  // packed rows: (group head 0, token, K/V head)
              if (b.pack_shift != 0) {
                store_slab_rows_tma<OTile, 64>(q_slot(slot), consumer * 64, &maps.o, 0,
                                               b.q_begin + (row0 >> b.pack_shift), b.head >> b.pack_shift);
              } else {
                store_slab_rows_tma<OTile, 64>(q_slot(slot), consumer * 64, &maps.o, b.q_begin + row0, b.head, 0);
              }
            }
          } else {
            if (b.pack_shift != 0) {
              copy_output_packed<OTile, 128, 64>(q_slot(slot), b.o_ptr<In>(p), p.o_row_stride, p.o_head_stride,
                                                 b.pack_shift, b.rows_q, consumer_thread % 128, consumer * 64);
            } else {
              copy_output<OTile, 128, 64>(q_slot(slot), b.o_ptr<In>(p), p.o_row_stride, b.rows_q, consumer_thread % 128,
                                          consumer * 64);
            }
            warpgroup_sync();  // every thread has read its rows of the slot
          }
        }
        if (consumer_thread % 128 == 0) sm90::mbarrier_arrive(&q_empty[slot]);
      }
    };
    // O apart: the item's last S (tile i of num_tiles) is done, so this warp is done with Q.
    const auto q_read = [&](int i, int num_tiles, int slot) {
      if constexpr (kOApart) {
        if (i == num_tiles - 1 && consumer_thread % 32 == 0) sm90::mbarrier_arrive(&q_empty[slot]);
      }
    };

    // r: the item round (items with keys: the slots' order); t: the tile over all items (whose S
    // is done, P V pending). A Q copied by cp.async is fenced to the async proxy here, after its
    // barrier, before wgmma reads it (its copies land asynchronously: the producer cannot fence
    // them; gathered K/V tiles it fences itself).
    int r = 0, t = 0;
    PrefillBlock blk = walk_item(p, items.at(w));
    const ItemTiles first_tiles = item_tiles(blk);
    int n_first = first_tiles.first, num_tiles = first_tiles.count, i = 1;
    const auto fence_q = [] {  // (a TMA Q needs none; one fence an item is cheaper than a flag held through it)
      if constexpr (Varlen) sm90::fence_proxy_async_shared();
    };
    unmasked = Base::unmasked_tiles(blk.mask, blk.m0 + warp_row0);
    Base::first_tile(
        kring, 0, consumer, pbuf, out, packed,
        [&] {
          sm90::mbarrier_wait_parity(&q_full[0], 0);
          kring.wait(0);
          fence_q();
        },
        [&] { issue_scores(0, 0); }, [&] { q_read(0, num_tiles, 0); }, [&](auto between) { softmax_scores(blk, n_first, between); });

    for (;;) {
      if (i < num_tiles) {  // a steady tile
        Base::steady_tile(
            kring, vring, t + 1, t, consumer, pbuf, out, packed, vbuf, correction, [] {}, [] {},
            [&] { issue_scores(t + 1, r % kQSlots); }, [&] { q_read(i, num_tiles, r % kQSlots); },
            [&](auto between) { softmax_scores(blk, n_first + i, between); });
        ++i;
        ++t;
        continue;
      }
      int w_next = w + 1;
      if (!next_item(p, items, w_next)) break;
      // Item r's last P V and the first S of item r + 1: with two slots issued together (the S
      // runs under item r's epilogue), with one after the epilogue has freed the slot.
      const int slot = (r + 1) % kQSlots;
      const auto wait_first_operands = [&] {
        sm90::mbarrier_wait_parity(&q_full[slot], ((r + 1) / kQSlots) & 1);
        kring.wait(t + 1);
        fence_q();
      };
      if constexpr (kQSlots == 2) wait_first_operands();
      vring.wait(t);
      Base::take_turn(consumer);
      Base::fence_operands(s, o, packed);
      Base::issue_pv(o, packed, vbuf, Ring::stage(t));
      if constexpr (kQSlots == 2) issue_scores(t + 1, slot);
      Base::pass_turn(consumer, false);
      Base::template wait_pv<kQSlots - 1>(o, packed);  // the P V (committed first) is done
      vring.release(t);
      epilogue(blk, r % kQSlots);
      if constexpr (kQSlots == 1) {
        wait_first_operands();
        Base::first_scores_issue(consumer, pbuf, out, packed, [&] { issue_scores(t + 1, slot); });
      }
      out.zero();
      softmax.init();
      ++r;
      w = w_next;
      blk = walk_item(p, items.at(w));
      const ItemTiles next_tiles = item_tiles(blk);
      n_first = next_tiles.first;
      num_tiles = next_tiles.count;
      unmasked = Base::unmasked_tiles(blk.mask, blk.m0 + warp_row0);
      Base::first_scores_finish(kring, t + 1, pbuf, packed, [&] { q_read(0, num_tiles, r % kQSlots); },
                                [&](auto between) { softmax_scores(blk, n_first, between); });  // O is zero: no rescale
      i = 1;
      ++t;
    }

    Base::last_pv(vring, t, consumer, out, pbuf, packed, vbuf, [] {});
    epilogue(blk, r % kQSlots);
#endif
  }
};

template <class In, int D, int Dv, bool Varlen = false, bool Cache = false>
__global__ void __launch_bounds__(PrefillSm90Persistent<In, D, Dv, Varlen, Cache>::kThreads,
                                  PrefillSm90Persistent<In, D, Dv, Varlen, Cache>::kCtasPerSm)
    prefill_sm90_persistent_kernel(const __grid_constant__ PrefillParams params,
                                   const __grid_constant__ PrefillTmaMaps maps) {
  extern __shared__ __align__(128) char smem[];
  PrefillSm90Persistent<In, D, Dv, Varlen, Cache>::run(params, maps, smem);
}

}  // namespace flashbuf
