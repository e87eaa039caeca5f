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
#include <utility>

#include "flashbuf/arch/sm80/cp_async.cuh"
#include "flashbuf/arch/sm80/fast_math.cuh"
#include "flashbuf/buffers/kv_buffer.cuh"
#include "flashbuf/buffers/register_buffers.cuh"
#include "flashbuf/core/config.hpp"
#include "flashbuf/core/mask.hpp"
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

  using TC = TiledTensorCore<In>;
  using QTile = SwizzledTile<kBM, D>;
  using OTile = SwizzledTile<kBM, Dv>;
  using KBuf = KBufferLDS<TC, kBN, kBN, D, kThreads>;
  // V fragments are read 64 depth columns at a time (32 for Dv = 96) to bound registers.
  static constexpr int kVChunk = Dv % 64 == 0 ? 64 : 32;
  using VBuf = VBufferTransposeLoads<VBufferConfig<kBN, kBN, kVChunk, Dv>, TC, kThreads>;
  using QBuf = QRegisterBuffer<TC, kMTiles, D, kBM, kTile.q_in_registers>;
  using PBuf = PRegisterBuffer<TC, kMTiles, kBN>;
  using OBuf = OutputRegisterBuffer<TC, kMTiles, Dv>;
  static_assert(PBuf::template feeds<VBuf>(), "P's fragment order must be the one V consumes");
  static_assert(KVBuffer<KBuf> && KVBuffer<VBuf>);

  // Shared memory: Q (reused for the O epilogue), K, V.
  static constexpr int kQBytes = QTile::kBytes > OTile::kBytes ? QTile::kBytes : OTile::kBytes;
  static constexpr int kSmemBytes = kQBytes + KBuf::kSmemBytes + VBuf::kSmemBytes;

  // Row reductions over the four lanes of a quad (they share a row of the accumulator).
  __device__ static float quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
  }
  __device__ static float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
  }

  __device__ static void run(const PrefillParams& p, char* smem) {
    const int m_block = p.num_m_blocks - 1 - static_cast<int>(blockIdx.x);  // heavy (causal) first
    const int head = blockIdx.y;
    const int batch = blockIdx.z;
    const int head_kv = head / p.group;
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;

    const int q_begin = p.cu_seqlens_q ? p.cu_seqlens_q[batch] : 0;
    const int seqlen_q = p.cu_seqlens_q ? p.cu_seqlens_q[batch + 1] - q_begin : p.seqlen_q;
    const int m0 = m_block * kBM;
    if (m0 >= seqlen_q) return;
    const int k_begin = p.cu_seqlens_k ? p.cu_seqlens_k[batch] : 0;
    const int seqlen_k = p.cu_seqlens_k ? p.cu_seqlens_k[batch + 1] - k_begin
                                        : (p.seqlens_k ? p.seqlens_k[batch] : p.seqlen_k);
    const MaskParams mask{seqlen_q, seqlen_k, p.window_left, p.window_right};
    const KeyRange keys = key_range(mask, m0, m0 + kBM);

    const In* q = static_cast<const In*>(p.q) + batch * p.q_batch_stride +
                  std::int64_t(q_begin + m0) * p.q_row_stride + head * p.q_head_stride;
    In* o = static_cast<In*>(p.o) + batch * p.o_batch_stride +
            std::int64_t(q_begin + m0) * p.o_row_stride + head * p.o_head_stride;
    const int rows_q = min(kBM, seqlen_q - m0);

    In* smem_q = reinterpret_cast<In*>(smem);
    KBuf kbuf;
    VBuf vbuf;
    kbuf.smem = reinterpret_cast<In*>(smem + kQBytes);
    vbuf.smem = reinterpret_cast<In*>(smem + kQBytes + KBuf::kSmemBytes);
    bind_source<KBuf>(kbuf, p.k, p.k_batch_stride, p.k_row_stride, p.k_head_stride, p, batch,
                      head_kv, k_begin);
    bind_source<VBuf>(vbuf, p.v, p.v_batch_stride, p.v_row_stride, p.v_head_stride, p, batch,
                      head_kv, k_begin);

    OBuf out;
    out.zero();
    float row_max[kMTiles][2], row_sum[kMTiles][2];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        row_max[mt][h] = kNegInf;
        row_sum[mt][h] = 0.0f;
      }

    if (!keys.empty()) {
      const int n_first = keys.begin / kBN;
      const int n_last = (keys.end - 1) / kBN;

      // Q and the first K tile.
      load_q(smem_q, q, p.q_row_stride, rows_q);
      kbuf.load_from_dram(n_first * kBN, seqlen_k - n_first * kBN);
      sm80::cp_async_commit_group();

      QBuf qbuf;
      qbuf.smem = smem_q;
      qbuf.warp_row0 = warp * 16 * kMTiles;

      for (int n = n_first; n <= n_last; ++n) {
        const int key0 = n * kBN;
        sm80::cp_async_wait_group<0>();  // K(n) (and Q) have landed: this thread's copies
        __syncthreads();                 // ... every thread's; and every warp is done with V(n-1)
        vbuf.load_from_dram(key0, seqlen_k - key0);  // V(n) loads while S(n) is computed
        sm80::cp_async_commit_group();
        if (n == n_first) qbuf.load_from_shared();

        PBuf pbuf;
        pbuf.zero();
        compute_scores(qbuf, kbuf, pbuf);
        if (p.softcap_inv > 0.0f) apply_softcap(pbuf, p.softcap_inv);
        const int q_row0 = m0 + warp * 16 * kMTiles;
        if (!tile_fully_visible(mask, q_row0, q_row0 + 16 * kMTiles, key0, key0 + kBN)) {
          apply_mask(pbuf, mask, q_row0, key0, lane);
        }
        online_softmax(pbuf, out, row_max, row_sum, p.scale_log2);

        sm80::cp_async_wait_group<0>();  // V(n) has landed
        __syncthreads();                 // ... for every thread; every warp is done with K(n)
        if (n < n_last) {                // K(n+1) loads while O += P V(n) is computed
          kbuf.load_from_dram(key0 + kBN, seqlen_k - key0 - kBN);
          sm80::cp_async_commit_group();
        }
        accumulate_pv(pbuf, vbuf, out);
      }
    }

    // Epilogue: divide by the row sums, write LSE, stage O through shared memory (Q's tile)
    // so that the global stores are whole 16-byte chunks of rows.
    const int group = lane / 4, quad = lane % 4;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) row_sum[mt][h] = quad_sum(row_sum[mt][h]);
      out.apply_softmax_denominator(mt, row_sum[mt][0], row_sum[mt][1]);
      if (p.lse != nullptr && quad == 0) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = warp * 16 * kMTiles + mt * 16 + h * 8 + group;
          if (m0 + r < seqlen_q) {
            const float lse = (row_max[mt][h] == kNegInf || row_sum[mt][h] <= 0.0f)
                                  ? kNegInf
                                  : (row_max[mt][h] * p.scale_log2 + __log2f(row_sum[mt][h])) * kLn2;
            p.lse[batch * p.lse_batch_stride + head * p.lse_head_stride + q_begin + m0 + r] = lse;
          }
        }
      }
    }
    __syncthreads();  // the last tile's Q reads (and K/V) are done before O overwrites Q's tile
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < OBuf::kNTiles; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = warp * 16 * kMTiles + mt * 16 + h * 8 + group;
          const int c = nt * 8 + quad * 2;
          *reinterpret_cast<std::uint32_t*>(smem_q + OTile::offset(r, c)) =
              TC::pack(out.o[mt][nt][2 * h], out.o[mt][nt][2 * h + 1]);
        }
    __syncthreads();
    constexpr int kChunks = kBM * Dv / 8;
    for (int chunk = threadIdx.x; chunk < kChunks; chunk += kThreads) {
      const int r = chunk / (Dv / 8), c = chunk % (Dv / 8) * 8;
      if (r < rows_q) {
        *reinterpret_cast<uint4*>(o + r * p.o_row_stride + c) =
            *reinterpret_cast<const uint4*>(smem_q + OTile::offset(r, c));
      }
    }
  }

  template <class Buf>
  __device__ static void bind_source(Buf& buf, const void* base, std::int64_t batch_stride,
                                     std::int64_t row_stride, std::int64_t head_stride,
                                     const PrefillParams& p, int batch, int head_kv, int k_begin) {
    const In* b = static_cast<const In*>(base) + head_kv * head_stride;
    buf.src.row_stride = row_stride;
    if constexpr (Paged) {
      buf.src.base = b;
      buf.src.pages = p.page_table + batch * p.page_table_stride;
      buf.src.page_stride = batch_stride;
      buf.src.page_size = p.page_size;
      buf.src.num_pages = p.num_pages;
    } else {
      buf.src.base = b + batch * batch_stride + std::int64_t(k_begin) * row_stride;
    }
  }

  __device__ static void load_q(In* smem_q, const In* q, std::int64_t row_stride, int rows) {
    constexpr int kChunksPerRow = D / 8;
    for (int chunk = threadIdx.x; chunk < kBM * kChunksPerRow; chunk += kThreads) {
      const int r = chunk / kChunksPerRow, c = chunk % kChunksPerRow * 8;
      const bool valid = r < rows;
      sm80::cp_async_cg_16(smem_q + QTile::offset(r, c), q + (valid ? r : 0) * row_stride + c, valid);
    }
  }

  // S = Q K^T for this warp's rows: walk the head dim in k-steps of 16.
  __device__ static void compute_scores(QBuf& qbuf, KBuf& kbuf, PBuf& pbuf) {
    static_for<D / 16>([&](auto kc) {
      constexpr int k = decltype(kc)::value;
      kbuf.template load_from_shared<k>(0);
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        const auto& a = qbuf.template mma_tile<k>(mt);
#pragma unroll
        for (int nt = 0; nt < PBuf::kNTiles; ++nt)
          TC::mma(pbuf.s[mt][nt], a, kbuf.frag[nt][0], kbuf.frag[nt][1]);
      }
    });
  }

  // O += P V: walk the keys in k-steps of 16; P's A fragments come straight from S.
  __device__ static void accumulate_pv(const PBuf& pbuf, VBuf& vbuf, OBuf& out) {
    static_for<kBN / 16>([&](auto kc) {
      constexpr int k = decltype(kc)::value;
      std::uint32_t a[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) pbuf.template mma_tile<k>(mt, a[mt]);
#pragma unroll
      for (int chunk = 0; chunk < Dv / kVChunk; ++chunk) {
        vbuf.template load_from_shared<k>(chunk);
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
          for (int nt = 0; nt < kVChunk / 8; ++nt)
            TC::mma(out.o[mt][chunk * (kVChunk / 8) + nt], a[mt], vbuf.frag[nt][0], vbuf.frag[nt][1]);
      }
    });
  }

  __device__ static void apply_softcap(PBuf& pbuf, float softcap_inv) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < PBuf::kNTiles; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) pbuf.s[mt][nt][i] = tanhf(pbuf.s[mt][nt][i] * softcap_inv);
  }

  // Scores the mask hides become -inf; coordinates follow the accumulator map.
  __device__ static void apply_mask(PBuf& pbuf, const MaskParams& mask, int q_row0, int key0,
                                    int lane) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < PBuf::kNTiles; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const RowCol rc = mma_m16n8k16::c_coord(lane, i);
          if (!visible(mask, q_row0 + mt * 16 + rc.row, key0 + nt * 8 + rc.col))
            pbuf.s[mt][nt][i] = kNegInf;
        }
  }

  // The online softmax in base 2. A row that has seen no visible key keeps max = -inf; its
  // exponent base is taken as 0 so that exp2(-inf - base) = 0 rather than NaN.
  __device__ static void online_softmax(PBuf& pbuf, OBuf& out, float (&row_max)[kMTiles][2],
                                        float (&row_sum)[kMTiles][2], float scale_log2) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      float correction[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        // Reductions as trees over the n8 tiles: a linear chain of dependent FMNMX / FADD
        // stalls on their fixed latency (Nsight Compute showed it as the top stall reason).
        float part[PBuf::kNTiles];
#pragma unroll
        for (int nt = 0; nt < PBuf::kNTiles; ++nt)
          part[nt] = fmaxf(pbuf.s[mt][nt][2 * h], pbuf.s[mt][nt][2 * h + 1]);
        const float m = quad_max(fmaxf(row_max[mt][h], tree_reduce(part, [](float a, float b) { return fmaxf(a, b); })));
        const float base = m == kNegInf ? 0.0f : m * scale_log2;
        correction[h] = sm80::ex2_approx_ftz(row_max[mt][h] * scale_log2 - base);
        row_max[mt][h] = m;
#pragma unroll
        for (int nt = 0; nt < PBuf::kNTiles; ++nt) {
          float& s0 = pbuf.s[mt][nt][2 * h];
          float& s1 = pbuf.s[mt][nt][2 * h + 1];
          s0 = sm80::ex2_approx_ftz(s0 * scale_log2 - base);
          s1 = sm80::ex2_approx_ftz(s1 * scale_log2 - base);
          part[nt] = s0 + s1;
        }
        row_sum[mt][h] = row_sum[mt][h] * correction[h] + tree_reduce(part, [](float a, float b) { return a + b; });
      }
      out.rescale(mt, correction[0], correction[1]);
    }
  }

  // Pairwise reduction of a register array (N a power of two), log2(N) dependent steps.
  template <int N, class Op>
  __device__ static float tree_reduce(float (&x)[N], Op op) {
    static_assert((N & (N - 1)) == 0, "tree_reduce: N must be a power of two");
#pragma unroll
    for (int stride = N / 2; stride > 0; stride /= 2)
#pragma unroll
      for (int i = 0; i < stride; ++i) x[i] = op(x[i], x[i + stride]);
    return x[0];
  }

  template <int N, class F>
  __device__ static void static_for(F&& f) {
    [&]<int... I>(std::integer_sequence<int, I...>) {
      (f(std::integral_constant<int, I>{}), ...);
    }(std::make_integer_sequence<int, N>{});
  }
};

template <class In, int D, int Dv, bool Paged, class Tile = TableTile<D, Dv>>
__global__ void __launch_bounds__(PrefillSm80<In, D, Dv, Paged, Tile>::kThreads)
    prefill_sm80_kernel(const __grid_constant__ PrefillParams params) {
  extern __shared__ __align__(128) char smem[];
  PrefillSm80<In, D, Dv, Paged, Tile>::run(params, smem);
}

}  // namespace flashbuf
