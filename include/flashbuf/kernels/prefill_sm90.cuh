// kernels: the Hopper prefill kernel (sm_90a), the same buffer concepts in their wgmma forms:
//   Q  : cp.async into a slab-major 128B-swizzled tile; QSharedBufferSm90 hands each warpgroup
//        the descriptor of its 64 rows (A of S = Q K^T from shared memory)
//   K  : KVBufferLDSSm90<KBufferConfig>  (K-major B of S = Q K^T), two shared stages
//   V  : KVBufferLDSSm90<VBufferConfig>  (N-major B of O += P V, the descriptor's transpose)
//   S/P: PRegisterBuffer over the wgmma accumulators (per warp the mma.sync C layout), packed
//        into A fragments of O += P V straight from registers (wgmma's register-A form)
//   O  : OutputRegisterBuffer, same epilogue as the sm80 kernel
//
// Block: two consumer warpgroups of 64 query rows each (block_m = 128). Tiles K(n+1), V(n+1)
// load (cp.async, every thread) while tile n is computed. This first Hopper form has no
// producer warp, no ping-pong between warpgroups and no TMA yet (see the tile table).
#pragma once

#include <cstdint>
#include <utility>

#include "flashbuf/arch/sm80/cp_async.cuh"
#include "flashbuf/arch/sm90/wgmma.cuh"
#include "flashbuf/buffers/kv_buffer_sm90.cuh"
#include "flashbuf/buffers/register_buffers.cuh"
#include "flashbuf/buffers/smem_tile.cuh"
#include "flashbuf/buffers/tensor_core.cuh"
#include "flashbuf/kernels/prefill_common.cuh"
#include "flashbuf/kernels/prefill_params.hpp"

namespace flashbuf {

// Tile table of the Hopper kernel. block_n: 128 keys while S (block_n / 2 registers) and O
// (Dv / 2) fit beside each other; 64 from D = 192, where O alone takes 96..128 registers.
constexpr int prefill_sm90_block_n(int head_dim, int head_dim_v) {
  return (head_dim > head_dim_v ? head_dim : head_dim_v) <= 128 ? 128 : 64;
}

template <class In, int D, int Dv, bool Paged>
struct PrefillSm90 {
  static constexpr int kWarpGroups = 2;
  static constexpr int kBM = 64 * kWarpGroups;
  static constexpr int kBN = prefill_sm90_block_n(D, Dv);
  static constexpr int kThreads = 128 * kWarpGroups;
  static constexpr int kStages = 2;

  using TC = TiledTensorCore<In>;      // P packing and the epilogue's conversion
  using WG = WgmmaTensorCore<In>;
  using QBuf = QSharedBufferSm90<WG, kBM, D>;
  using QTile = typename QBuf::Tile;
  using KBuf = KVBufferLDSSm90<KBufferConfig<kBN, D, kBN>, WG, kThreads, kStages>;
  using VBuf = KVBufferLDSSm90<VBufferConfig<kBN, kBN, Dv, Dv>, WG, kThreads, kStages>;
  using PBuf = PRegisterBuffer<TC, 1, kBN>;
  using OBuf = OutputRegisterBuffer<TC, 1, Dv>;
  using OTile = SwizzledTile<kBM, Dv>;
  using Softmax = OnlineSoftmax<1, PBuf::kNTiles>;
  static_assert(KVBuffer<KBuf> && KVBuffer<VBuf>);

  static constexpr int kAlign = 1024;  // 128-byte swizzle atoms must start 1024-byte aligned
  static constexpr int kQBytes = round_up(QTile::kBytes > OTile::kBytes ? QTile::kBytes : OTile::kBytes, kAlign);
  static constexpr int kSmemBytes = kAlign + kQBytes + KBuf::kSmemBytes + VBuf::kSmemBytes;

  __device__ static void run(const PrefillParams& p, char* smem_raw) {
#ifdef FLASHBUF_NO_WGMMA
    __trap();  // never launched on a device pass without wgmma (see arch/sm90/target.cuh)
#else
    const PrefillBlock blk = PrefillBlock::make(p, kBM);
    if (blk.empty()) return;
    const int warpgroup = threadIdx.x / 128;
    const int warp_row0 = warpgroup * 64 + (threadIdx.x % 128) / 32 * 16;

    char* smem = reinterpret_cast<char*>(round_up(reinterpret_cast<std::uintptr_t>(smem_raw), std::uintptr_t(kAlign)));
    In* smem_q = reinterpret_cast<In*>(smem);
    KBuf kbuf;
    VBuf vbuf;
    kbuf.smem = reinterpret_cast<In*>(smem + kQBytes);
    vbuf.smem = reinterpret_cast<In*>(smem + kQBytes + KBuf::kSmemBytes);
    blk.bind_kv<In, Paged>(kbuf, vbuf, p);
    QBuf qbuf;
    qbuf.smem = smem_q;
    qbuf.first_row = warpgroup * 64;

    OBuf out;
    out.zero();
    Softmax softmax;
    softmax.init();

    if (!blk.keys.empty()) {
      const int n_first = blk.keys.begin / kBN;
      const int n_last = (blk.keys.end - 1) / kBN;
      const int seqlen_k = blk.seqlen_k;
      auto load_kv = [&](int n) {
        kbuf.load_from_dram(n * kBN, seqlen_k - n * kBN);
        vbuf.load_from_dram(n * kBN, seqlen_k - n * kBN);
      };
      // Prologue: Q and tile n_first (one group), tile n_first + 1 (the next group, maybe empty).
      load_tile_async<QTile, kThreads>(smem_q, blk.q_ptr<In>(p), p.q_row_stride, blk.rows_q);
      load_kv(n_first);
      sm80::cp_async_commit_group();
      if (n_first + 1 <= n_last) load_kv(n_first + 1);
      sm80::cp_async_commit_group();

      for (int n = n_first; n <= n_last; ++n) {
        const int key0 = n * kBN;
        const int stage = (n - n_first) % kStages;
        kbuf.read_stage = stage;
        vbuf.read_stage = stage;
        sm80::cp_async_wait_group<1>();   // tile n (and Q) landed for this thread ...
        sm90::fence_proxy_async_shared();  // ... visible to the tensor cores' async proxy ...
        __syncthreads();                   // ... for every thread

        // S = Q K^T: D/16 wgmma steps, the first one overwriting the accumulators.
        PBuf pbuf;
        float(&s)[kBN / 2] = reinterpret_cast<float(&)[kBN / 2]>(pbuf.s);
        sm90::wgmma_fence();
        static_for<D / 16>([&](auto kc) {
          constexpr int k = decltype(kc)::value;
          kbuf.template load_from_shared<k>(0);
          WG::template mma_ss<kBN, BMajor::k>(s, qbuf.template mma_tile<k>(), kbuf.mma_tile(), k > 0);
        });
        sm90::wgmma_commit_group();
        sm90::wgmma_wait_group<0>();
        sm90::fence_registers(s);

        if (p.softcap_inv > 0.0f) Softmax::apply_softcap(pbuf.s, p.softcap_inv);
        const int q_row0 = blk.m0 + warp_row0;
        if (!tile_fully_visible(blk.mask, q_row0, q_row0 + 16, key0, key0 + kBN)) {
          Softmax::apply_mask(pbuf.s, blk.mask, q_row0, key0);
        }
        softmax.update(pbuf.s, out, p.scale_log2);

        // O += P V: P's A fragments straight from the accumulators, V through the transpose.
        float(&o)[Dv / 2] = reinterpret_cast<float(&)[Dv / 2]>(out.o);
        std::uint32_t a[kBN / 16][4];
        static_for<kBN / 16>([&](auto kc) {
          constexpr int k = decltype(kc)::value;
          pbuf.template mma_tile<k>(0, a[k]);
        });
        sm90::wgmma_fence();
        static_for<kBN / 16>([&](auto kc) {
          constexpr int k = decltype(kc)::value;
          vbuf.template load_from_shared<k>(0);
          WG::template mma_rs<Dv, BMajor::n>(o, a[k], vbuf.mma_tile(), true);
        });
        sm90::wgmma_commit_group();
        sm90::wgmma_wait_group<0>();
        sm90::fence_registers(o);

        __syncthreads();  // every warpgroup is done with this stage: refill it with tile n + 2
        kbuf.write_stage = stage;
        vbuf.write_stage = stage;
        if (n + 2 <= n_last) load_kv(n + 2);
        sm80::cp_async_commit_group();  // possibly empty: keeps "the newest group = next tile"
      }
    }

    softmax.finalize(out, p, blk, warp_row0);
    __syncthreads();  // Q's tile is free for the O epilogue
    store_output<OTile, TC, kThreads>(out.o, smem_q, warp_row0, blk.o_ptr<In>(p), p.o_row_stride, blk.rows_q);
#endif
  }
};

template <class In, int D, int Dv, bool Paged>
__global__ void __launch_bounds__(PrefillSm90<In, D, Dv, Paged>::kThreads, 1)
    prefill_sm90_kernel(const __grid_constant__ PrefillParams params) {
  extern __shared__ __align__(128) char smem[];
  PrefillSm90<In, D, Dv, Paged>::run(params, smem);
}

}  // namespace flashbuf
