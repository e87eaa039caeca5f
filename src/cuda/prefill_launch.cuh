// The prefill launchers of both kernels: AttentionProblem -> PrefillParams -> kernel launch.
// Compiled once per (dtype, D, Dv) in the generated units (cmake/instantiations.cmake); every other unit sees
// only the declaration, so no kernel is compiled twice.
#pragma once

#include <cuda_runtime.h>

#include "api/problem.hpp"
#include "cuda/check.cuh"
#include "cuda/device_attribute.cuh"
#include "cuda/device_cache.hpp"
#include "cuda/prefill_grid_knob.hpp"
#include "cuda/prefill_grid_taken.hpp"
#include "cuda/tensor_map.hpp"
#include "cuda/work_order.hpp"
#include "flashbuf/core/gqa_packing.hpp"
#include "flashbuf/core/paged_boxes.hpp"
#include "flashbuf/core/work_order.hpp"
#include "flashbuf/kernels/prefill_sm80.cuh"
#include "flashbuf/kernels/prefill_sm90.cuh"
#include "flashbuf/kernels/prefill_sm90_persistent.cuh"

namespace flashbuf::detail {

// Which prefill kernel: the mma.sync one (sm80 class) or the Hopper wgmma one (sm_90a).
enum class PrefillKernel { mma_sync, wgmma };

// Raises a kernel's dynamic shared-memory limit once per device, not on every launch: the
// flags are keyed on the kernel's class, so every instantiation has its own.
template <class Kernel>
void raise_smem_limit_once(const void* kernel_fn, int device) {
  static PerDevice<bool> raised;
  once_per_device(raised, device, [kernel_fn] {
    FLASHBUF_CUDA_CHECK(cudaFuncSetAttribute(kernel_fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             Kernel::kSmemBytes));
    // All of the SM's unified L1 as shared memory: kernels that run two blocks per SM need it.
    FLASHBUF_CUDA_CHECK(cudaFuncSetAttribute(kernel_fn, cudaFuncAttributePreferredSharedMemoryCarveout,
                                             cudaSharedmemCarveoutMaxShared));
    return true;
  });
}

// One wave of Kernel's blocks: as many as the device's SMs hold at once.
template <class Kernel>
int device_wave(const AttentionProblem& pr) {
  return cached_device_attribute<cudaDevAttrMultiProcessorCount>(pr.device_index) * Kernel::kCtasPerSm;
}

// One launch of `kernel` (a __global__ of class Kernel) over the problem's grid: query blocks x
// heads (K/V heads where the rows are packed) x sequences. The Hopper kernel's batch-form
// launches take SectionOrder's order (core/work_items.hpp; the mma.sync kernel reads only the
// grid's: PrefillBlock::make_in_grid); its varlen ones keep the grid's (a packed varlen batch of
// equal lengths ran slower in sections: bench/NOTES-prefill.md, "The causal grid's order").
template <class Kernel, class... Extra>
void launch_prefill_kernel(void (*kernel)(PrefillParams, Extra...), PrefillParams params, const AttentionProblem& pr,
                           const Extra&... extra) {
  raise_smem_limit_once<Kernel>(reinterpret_cast<const void*>(kernel), pr.device_index);
  if constexpr (requires { Kernel::kCtasPerSm; }) {  // the Hopper kernel
    if (pr.cu_seqlens_q == nullptr) {  // (batch-form launches never pack: heads_q is the grid's)
      const MaskParams mask{pr.seqlen_q, pr.seqlen_k, pr.window_left, pr.window_right};
      const long long pairs = static_cast<long long>(pr.heads_q) * pr.batch;
      const int section = longest_first_section(mask, params.num_m_blocks, pairs, device_wave<Kernel>(pr));
      params.sections = SectionOrder(section, params.num_m_blocks, static_cast<int>(pairs), pr.heads_q);
    }
  }
  last_prefill_grid = PrefillGrid::block_per_item;  // (cuda/prefill_grid_taken.hpp)
  kernel<<<dim3(params.num_m_blocks, pr.heads_q >> params.pack_shift, pr.batch), Kernel::kThreads, Kernel::kSmemBytes,
           static_cast<cudaStream_t>(pr.stream)>>>(params, extra...);
  FLASHBUF_CUDA_CHECK(cudaGetLastError());
}

// A varlen batch's query blocks longest first (core/work_order.hpp): the order prologue, launched
// here on the problem's stream, writes its table into stream-ordered memory (cudaMallocAsync,
// capturable as a graph's memory nodes), which the caller's kernel reads and the caller frees
// after it on the same stream (free_after_kernel). Sets `items` to the table's capacity times the
// heads a block walks. Null, having launched nothing, where those items would pass 2^31 or there
// is no stream-ordered allocator.
template <class Kernel>
std::int32_t* launch_longest_first_order(const PrefillParams& params, const AttentionProblem& pr, std::int64_t& items) {
  const int heads = pr.heads_q >> params.pack_shift;  // the grid's: K/V heads where rows are packed
  const std::int64_t capacity = work_order_capacity(pr.total_q << params.pack_shift, pr.batch, Kernel::kBM);
  items = capacity * heads;
  if (items > 0x7fffffff) return nullptr;
  const auto stream = static_cast<cudaStream_t>(pr.stream);
  std::int32_t* table = nullptr;
  const std::size_t bytes = sizeof(std::int32_t) * static_cast<std::size_t>(work_order_entries(capacity));
  if (cudaMallocAsync(reinterpret_cast<void**>(&table), bytes, stream) != cudaSuccess) {
    cudaGetLastError();  // no stream-ordered allocator here
    return nullptr;
  }
  WorkOrderParams order{};
  order.cu_seqlens_q = pr.cu_seqlens_q;
  order.cu_seqlens_k = pr.cu_seqlens_k;
  order.seqlens_k = pr.seqlens_k;
  order.seqlen_k = pr.seqlen_k;
  order.batch = pr.batch;
  order.window_left = pr.window_left;
  order.window_right = pr.window_right;
  order.block_m = Kernel::kBM;
  order.block_n = Kernel::kBN;
  order.row_shift = params.pack_shift;
  order.capacity = capacity;
  order.table = table;
  launch_work_order(order, stream);
  return table;
}
// Frees an order table after the kernel just launched on the problem's stream, whatever its
// launch did; then reports that launch's error.
inline void free_after_kernel(std::int32_t* table, const AttentionProblem& pr) {
  const cudaError_t launched = cudaGetLastError();
  const cudaError_t freed = cudaFreeAsync(table, static_cast<cudaStream_t>(pr.stream));
  FLASHBUF_CUDA_CHECK(launched);
  FLASHBUF_CUDA_CHECK(freed);
}

// A varlen batch of several sequences launched longest first, a block per item of the order
// table (past its count: empty blocks). Returns false, having launched nothing, where it does
// not apply (one sequence or lengths alike, longest_first_pays; no table): the caller launches
// the grid order.
template <class Kernel, class... Extra>
bool launch_prefill_longest_first(void (*kernel)(PrefillParams, Extra...), PrefillParams params,
                                  const AttentionProblem& pr, const Extra&... extra) {
  if (pr.cu_seqlens_q == nullptr || !longest_first_pays(pr.total_q, pr.batch, pr.max_seqlen_q)) return false;
  std::int64_t items = 0;
  std::int32_t* const table = launch_longest_first_order<Kernel>(params, pr, items);
  if (table == nullptr) return false;
  params.item_order = table;
  raise_smem_limit_once<Kernel>(reinterpret_cast<const void*>(kernel), pr.device_index);
  last_prefill_grid = PrefillGrid::block_per_item;
  kernel<<<static_cast<unsigned>(items), Kernel::kThreads, Kernel::kSmemBytes, static_cast<cudaStream_t>(pr.stream)>>>(
      params, extra...);
  free_after_kernel(table, pr);
  return true;
}

// The persistent Hopper kernel takes batch-form queries, over batch-form K/V or a cache, whose
// every query block has keys (seqlen_q <= seqlen_k: bottom-right masks leave each query row at
// least its diagonal key; a cache's device lengths may still leave an item none, which the
// cache's walk gives a masked tile), where it beats BlockPerItem (core/work_items.hpp), and
// whose every operand has its TMA form (persistent_maps_usable; a cache, paged or with
// seqlens_k: its maps, the tail gathered); the rest keep a block per query block. Asked before
// any tensor map is encoded, so a problem that keeps a block per item encodes only its own maps.
// `mean_tiles`: the mean key tiles of Kernel's items (mean_key_tiles).
template <class Kernel, class BlockPerItem>
bool persistent_prefill_wanted(const AttentionProblem& pr, double mean_tiles) {
  const PersistentGridKnob knob = persistent_grid_knob();
  if (knob.off || pr.seqlen_k <= 0 || pr.seqlen_q > pr.seqlen_k) return false;
  const std::int64_t m_blocks = (pr.max_seqlen_q + Kernel::kBM - 1) / Kernel::kBM;
  if (m_blocks * pr.heads_q * pr.batch > 0x7fffffff) return false;
  return knob.forced || persistent_grid_pays(mean_tiles, BlockPerItem::kConsumers,
                                             widest_head_dim(pr.head_dim, pr.head_dim_v));
}
// `gathers_tail`: the walk gathers a sequence's last tile itself (a cache's walk), so maps whose
// rows run on past a sequence serve it too.
inline bool persistent_maps_usable(const PrefillTmaMaps& maps, bool gathers_tail = false) {
  return maps.enabled && (gathers_tail || !maps.gather_tail) && maps.q_enabled && maps.o_enabled;
}

// The blocks of a persistent grid of Kernel: one wave, or the knob's cap.
template <class Kernel>
int persistent_wave(const AttentionProblem& pr) {
  const int cap = persistent_grid_knob().cap;
  return cap > 0 ? cap : device_wave<Kernel>(pr);
}

// One wave of blocks (at most one per item: params.num_items) walking the items; the caller
// checks the launch.
template <class Kernel>
void launch_walk(void (*kernel)(PrefillParams, PrefillTmaMaps), const PrefillParams& params, const AttentionProblem& pr,
                 const PrefillTmaMaps& maps) {
  raise_smem_limit_once<Kernel>(reinterpret_cast<const void*>(kernel), pr.device_index);
  const int wave = persistent_wave<Kernel>(pr);
  const int blocks = params.num_items < wave ? params.num_items : wave;
  last_prefill_grid = PrefillGrid::persistent_walk;
  kernel<<<blocks, Kernel::kThreads, Kernel::kSmemBytes, static_cast<cudaStream_t>(pr.stream)>>>(params, maps);
}

// A varlen batch on the persistent grid: where every sequence's queries are its keys (one
// cu_seqlens for both, so every item has keys), K and V are not paged, both consumers' O stages
// over its item's Q slot (two slots: Kernel::kQSlots), the launch's GQA packing is the one for
// Kernel's rows, and its items are short (persistent_grid_pays, at the mean sequence; the knob
// forces or forbids the grid as for batch-form problems). A block per item pays each item's start
// and epilogue, which the walk hides (bench/NOTES-prefill.md, "The varlen walk").
template <class Kernel, class BlockPerItem>
bool persistent_varlen_wanted(const AttentionProblem& pr, const PrefillParams& params) {
  if (pr.cu_seqlens_q == nullptr || pr.cu_seqlens_k != pr.cu_seqlens_q || pr.total_k != pr.total_q ||
      pr.seqlens_k != nullptr || pr.paged()) {
    return false;
  }
  const PersistentGridKnob knob = persistent_grid_knob();
  if (knob.off || pr.batch <= 0 || pr.total_q <= 0) return false;
  const int mean_len = static_cast<int>(pr.total_q / pr.batch);
  const MaskParams mean{mean_len << params.pack_shift, mean_len, pr.window_left, pr.window_right, params.pack_shift};
  return knob.forced || persistent_grid_pays(mean_key_tiles(mean, Kernel::kBM, Kernel::kBN), BlockPerItem::kConsumers,
                                             widest_head_dim(pr.head_dim, pr.head_dim_v));
}
// A varlen batch's Q and O for the persistent varlen walk, whose Q boxes may run past a sequence
// (masked rows) and which stores O by TMA only for blocks inside their sequence (the block per
// item has no such rule, so these maps are the walk's alone): one packed sequence of rows,
// (cols, total_q, heads, 1), or where the launch packs each K/V head's 2^shift query heads into
// rows, (cols, 2^shift heads, total_q tokens, K/V heads), whose boxes of 2^shift x rows >> shift
// lay the packed rows out in their order (row r: token r >> shift, head r & (2^shift - 1)).
template <int BlockM>
void add_packed_qo_maps(PrefillTmaMaps& maps, const AttentionProblem& pr, int pack_shift) {
  const int tokens = static_cast<int>(pr.total_q);  // < 2^31 (validate.cpp)
  const int group = 1 << pack_shift;
  const auto view = [&](const void* base, int cols, std::int64_t row_stride, std::int64_t head_stride) {
    if (pack_shift == 0) {
      return SlabTensor{base, pr.dtype, cols, tokens, pr.heads_q, 1, row_stride, head_stride, row_stride * pr.total_q};
    }
    return SlabTensor{base, pr.dtype, cols, group, tokens, pr.heads_q >> pack_shift,
                      head_stride, row_stride, head_stride * group};
  };
  maps.q_enabled = make_slab_tensor_map(&maps.q, view(pr.q, pr.head_dim, pr.q_row_stride, pr.q_head_stride),
                                        pack_shift == 0 ? BlockM : group, pack_shift == 0 ? 1 : BlockM >> pack_shift);
  maps.o_enabled = make_slab_tensor_map(&maps.o, view(pr.o, pr.head_dim_v, pr.o_row_stride, pr.o_head_stride),
                                        pack_shift == 0 ? 64 : group, pack_shift == 0 ? 1 : 64 >> pack_shift);
}

// Its launch: one wave of blocks walking the items (a block whose walk finds none returns). A
// skewed batch (longest_first_pays) walks its longest-first order table, heaviest first; a batch
// of like lengths walks the grid's numbering (max_seqlen_q's query blocks of each head and
// sequence, a pair's blocks together: the table's order, heads innermost and free within a
// bucket, scatters a pair's blocks over the launch, and its K/V over the L2). False, having
// launched nothing, where the items would pass 2^31 or the table cannot be made.
template <class Kernel>
bool launch_prefill_persistent_varlen(void (*kernel)(PrefillParams, PrefillTmaMaps), PrefillParams params,
                                      const AttentionProblem& pr, const PrefillTmaMaps& maps) {
  std::int64_t items = static_cast<std::int64_t>(params.num_m_blocks) * (pr.heads_q >> params.pack_shift) * pr.batch;
  std::int32_t* table = nullptr;
  if (longest_first_pays(pr.total_q, pr.batch, pr.max_seqlen_q)) {
    table = launch_longest_first_order<Kernel>(params, pr, items);
    if (table == nullptr) return false;
  } else if (items > 0x7fffffff) {
    return false;
  }
  params.item_order = table;
  params.num_items = static_cast<int>(items);
  launch_walk<Kernel>(kernel, params, pr, maps);
  if (table != nullptr) {
    free_after_kernel(table, pr);
  } else {
    FLASHBUF_CUDA_CHECK(cudaGetLastError());
  }
  return true;
}

// A batch-form problem's walk: every item is a query block of a head and sequence, so every block
// of the wave gets one.
template <class Kernel>
void launch_prefill_persistent(void (*kernel)(PrefillParams, PrefillTmaMaps), PrefillParams params,
                               const AttentionProblem& pr, const PrefillTmaMaps& maps) {
  params.num_m_blocks = (pr.max_seqlen_q + Kernel::kBM - 1) / Kernel::kBM;
  params.num_items = params.num_m_blocks * pr.heads_q * pr.batch;  // < 2^31 (persistent_prefill_wanted)
  launch_walk<Kernel>(kernel, params, pr, maps);
  FLASHBUF_CUDA_CHECK(cudaGetLastError());
}

// The Hopper kernel's K/V tensor maps, boxes of 64 columns x BlockN rows (pages: fewer):
//   batch-form K/V   (cols, seqlen_k, heads, batch); rows past seqlen_k read as zeros
//   seqlens_k        the same over the cache's capacity; the tail tile is gathered
//   varlen           (cols, total_k, heads, 1), a sequence from its cu_seqlens_k row; the tail
//                    tile is gathered (the rows after it are the next sequence's)
//   paged            (cols, page rows, heads, pages), boxes of paged_tma::box_rows rows
//                    (core/paged_boxes.hpp); the tail tile is gathered
// Other page sizes, or strides TMA cannot describe, keep maps.enabled = 0 and the cp.async
// gather for every tile.
// Q and O of batch-form queries (varlen: a block's box would run into the next sequence)
//   (cols, seqlen_q, heads, batch): Q in boxes of 64 columns x BlockM rows (rows past seqlen_q
//   read as zeros), O in boxes of 64 x 64 written by TMA stores (rows past it not written).
template <int BlockN, int BlockM>
PrefillTmaMaps make_prefill_tma_maps(const AttentionProblem& pr) {
  PrefillTmaMaps maps{};
  if (pr.cu_seqlens_q == nullptr) {
    const SlabTensor q{pr.q, pr.dtype, pr.head_dim, pr.seqlen_q, pr.heads_q, pr.batch,
                       pr.q_row_stride, pr.q_head_stride, pr.q_batch_stride};
    maps.q_enabled = make_slab_tensor_map(&maps.q, q, BlockM);
    const SlabTensor o{pr.o, pr.dtype, pr.head_dim_v, pr.seqlen_q, pr.heads_q, pr.batch,
                       pr.o_row_stride, pr.o_head_stride, pr.o_batch_stride};
    maps.o_enabled = make_slab_tensor_map(&maps.o, o, 64);
  }
  int rows = pr.seqlen_k, outer = pr.batch, box_rows = BlockN;
  std::int64_t k_outer_stride = pr.k_batch_stride, v_outer_stride = pr.v_batch_stride;
  if (pr.paged()) {
    const int row_bytes = 2 * (pr.head_dim < pr.head_dim_v ? pr.head_dim : pr.head_dim_v);  // bf16 / fp16
    box_rows = paged_tma::box_rows(pr.page_size, BlockN, row_bytes);
    if (box_rows == 0) return maps;
    rows = pr.page_size;
    outer = pr.num_pages;  // the batch strides are the page strides
  } else if (pr.cu_seqlens_k != nullptr) {
    if (pr.total_k <= 0 || pr.total_k > 0x7fffffff) return maps;
    rows = static_cast<int>(pr.total_k);
    outer = 1;
    k_outer_stride = pr.k_row_stride * pr.total_k;  // never stepped; any valid stride
    v_outer_stride = pr.v_row_stride * pr.total_k;
  }
  maps.gather_tail = !batch_form_kv(pr);
  maps.box_rows = box_rows;
  const SlabTensor k{pr.k, pr.dtype, pr.head_dim, rows, pr.heads_kv, outer,
                     pr.k_row_stride, pr.k_head_stride, k_outer_stride};
  const SlabTensor v{pr.v, pr.dtype, pr.head_dim_v, rows, pr.heads_kv, outer,
                     pr.v_row_stride, pr.v_head_stride, v_outer_stride};
  maps.enabled = make_slab_tensor_map(&maps.k, k, box_rows) && make_slab_tensor_map(&maps.v, v, box_rows);
  return maps;
}

// `pack_shift`: the launch's GQA packing (core/gqa_packing.hpp), 0 for none.
inline PrefillParams make_prefill_params(const AttentionProblem& pr, int block_m, int pack_shift) {
  PrefillParams p{};
  p.q = pr.q;
  p.k = pr.k;
  p.v = pr.v;
  p.o = pr.o;
  p.lse = pr.lse;
  p.sinks = pr.sinks;
  p.q_batch_stride = pr.q_batch_stride;
  p.q_row_stride = pr.q_row_stride;
  p.q_head_stride = pr.q_head_stride;
  p.k_batch_stride = pr.k_batch_stride;
  p.k_row_stride = pr.k_row_stride;
  p.k_head_stride = pr.k_head_stride;
  p.v_batch_stride = pr.v_batch_stride;
  p.v_row_stride = pr.v_row_stride;
  p.v_head_stride = pr.v_head_stride;
  p.o_batch_stride = pr.o_batch_stride;
  p.o_row_stride = pr.o_row_stride;
  p.o_head_stride = pr.o_head_stride;
  p.lse_batch_stride = pr.lse_batch_stride;
  p.lse_head_stride = pr.lse_head_stride;
  p.cu_seqlens_q = pr.cu_seqlens_q;
  p.cu_seqlens_k = pr.cu_seqlens_k;
  p.seqlens_k = pr.seqlens_k;
  p.page_table = pr.page_table;
  p.page_table_stride = pr.page_table_stride;
  p.page_div = FastDivmod(pr.page_size);
  p.num_pages = pr.num_pages;
  p.seqlen_q = pr.seqlen_q;
  p.seqlen_k = pr.seqlen_k;
  p.total_q = static_cast<int>(pr.total_q);  // < 2^31 (validate.cpp)
  p.total_k = static_cast<int>(pr.total_k);
  p.heads_q = pr.heads_q;
  p.group = pr.heads_q / pr.heads_kv;
  p.pack_shift = pack_shift;
  p.num_m_blocks = static_cast<int>(((static_cast<std::int64_t>(pr.max_seqlen_q) << pack_shift) + block_m - 1) / block_m);
  // With softcap the kernel computes tanh(s * scale / softcap) and the softmax runs on
  // softcap * tanh(...); without it the scale folds into the exp2 argument.
  p.softcap_inv = pr.softcap > 0.0f ? pr.softmax_scale / pr.softcap : 0.0f;
  p.scale_log2 = (pr.softcap > 0.0f ? pr.softcap : pr.softmax_scale) * kLog2e;
  p.window_left = pr.window_left;
  p.window_right = pr.window_right;
  return p;
}

template <PrefillKernel K, class In, int D, int Dv, bool Paged>
void launch_prefill_variant(const PrefillParams& params, const AttentionProblem& pr) {
  if constexpr (K == PrefillKernel::mma_sync) {
    launch_prefill_kernel<PrefillSm80<In, D, Dv, Paged>>(&prefill_sm80_kernel<In, D, Dv, Paged>, params, pr);
  } else {
    using Kernel = PrefillSm90<In, D, Dv, Paged>;
    using Persistent = PrefillSm90Persistent<In, D, Dv, false, Paged>;  // the walk over these K/V (pages: a cache's)
    const MaskParams mask{pr.seqlen_q, pr.seqlen_k, pr.window_left, pr.window_right};  // once a launch
    if constexpr (Paged) {
      // Pages: the walk where items are short, by the batch-form rule; its producers gather the
      // tile that reaches past a sequence's end, as the block per item's do.
      if (persistent_prefill_wanted<Persistent, Kernel>(pr, mean_key_tiles(mask, Persistent::kBM, Persistent::kBN))) {
        const PrefillTmaMaps maps = make_prefill_tma_maps<Persistent::kBN, Persistent::kBM>(pr);
        if (persistent_maps_usable(maps, true)) {
          launch_prefill_persistent<Persistent>(&prefill_sm90_persistent_kernel<In, D, Dv, false, Paged>, params, pr,
                                                maps);
          return;
        }
      }
    } else {
      if constexpr (Persistent::kQSlots == 2 && Persistent::kBM == Kernel::kBM) {
        using Walk = PrefillSm90Persistent<In, D, Dv, true>;
        if (persistent_varlen_wanted<Walk, Kernel>(pr, params)) {
          PrefillTmaMaps maps = make_prefill_tma_maps<Walk::kBN, Walk::kBM>(pr);
          add_packed_qo_maps<Walk::kBM>(maps, pr, params.pack_shift);
          if (maps.enabled && maps.gather_tail &&
              launch_prefill_persistent_varlen<Walk>(&prefill_sm90_persistent_kernel<In, D, Dv, true>, params, pr,
                                                     maps)) {
            return;
          }
        }
      }
      // A packed batch-form launch keeps a block per item: the walk counts query heads.
      const double mean_tiles = mean_key_tiles(mask, Persistent::kBM, Persistent::kBN);
      if (params.pack_shift == 0 && persistent_prefill_wanted<Persistent, Kernel>(pr, mean_tiles)) {
        if constexpr (D <= 64 && Dv <= 64) {  // three consumers over 192-row items, a block each, where they pay
          using Block3 = PrefillSm90<In, D, Dv, false, 3, Persistent::kBN>;
          const long long heads_x_batch = static_cast<long long>(pr.heads_q) * pr.batch;
          // (Not where the grid knob forces the persistent grid; the device's wave, not the knob's cap.)
          if (!persistent_grid_knob().forced &&
              three_consumers_pay(mask, mean_tiles, Block3::kBM, heads_x_batch, device_wave<Block3>(pr))) {
            const PrefillTmaMaps maps = make_prefill_tma_maps<Block3::kBN, Block3::kBM>(pr);
            if (persistent_maps_usable(maps)) {
              PrefillParams block_params = params;
              block_params.num_m_blocks = static_cast<int>((pr.max_seqlen_q + Block3::kBM - 1) / Block3::kBM);
              launch_prefill_kernel<Block3>(&prefill_sm90_kernel<In, D, Dv, false, 3, Persistent::kBN>, block_params,
                                            pr, maps);
              return;
            }
          }
        }
        const PrefillTmaMaps maps = make_prefill_tma_maps<Persistent::kBN, Persistent::kBM>(pr);
        if (persistent_maps_usable(maps)) {
          launch_prefill_persistent<Persistent>(&prefill_sm90_persistent_kernel<In, D, Dv>, params, pr, maps);
          return;
        }
        // A batch-form cache with the device's lengths (seqlens_k): the cache's walk, which
        // gathers each sequence's last tile (the paged launch's kernel).
        using CacheWalk = PrefillSm90Persistent<In, D, Dv, false, true>;
        static_assert(CacheWalk::kBN == Persistent::kBN && CacheWalk::kBM == Persistent::kBM);
        if (pr.seqlens_k != nullptr && persistent_maps_usable(maps, true)) {
          launch_prefill_persistent<CacheWalk>(&prefill_sm90_persistent_kernel<In, D, Dv, false, true>, params, pr,
                                               maps);
          return;
        }
        // Boxes of the same shape (D 128): the block per item takes these maps. D 64's blocks
        // per item have 64 query rows against 128, above D 128 80-key tiles against 64.
        if constexpr (Persistent::kBM == Kernel::kBM && Persistent::kBN == Kernel::kBN) {
          launch_prefill_kernel<Kernel>(&prefill_sm90_kernel<In, D, Dv, Paged>, params, pr, maps);
          return;
        }
      }
    }
    const PrefillTmaMaps maps = make_prefill_tma_maps<Kernel::kBN, Kernel::kBM>(pr);
    if (!launch_prefill_longest_first<Kernel>(&prefill_sm90_kernel<In, D, Dv, Paged>, params, pr, maps)) {
      launch_prefill_kernel<Kernel>(&prefill_sm90_kernel<In, D, Dv, Paged>, params, pr, maps);
    }
  }
}

template <PrefillKernel K, class In, int D, int Dv>
void launch_prefill(const AttentionProblem& pr) {
  constexpr int block_m =
      K == PrefillKernel::mma_sync ? PrefillSm80<In, D, Dv, false>::kBM : PrefillSm90<In, D, Dv, false>::kBM;
  // Only the Hopper kernel packs, and not over a page table: the paged kernel then holds the
  // shift as the constant 0.
  const bool may_pack = K == PrefillKernel::wgmma && !pr.paged();
  const int pack_shift =
      may_pack ? gqa_pack_shift(pr.heads_q / pr.heads_kv, pr.cu_seqlens_q != nullptr, pr.total_q, pr.max_seqlen_q, block_m)
               : 0;
  const PrefillParams p = make_prefill_params(pr, block_m, pack_shift);
  if (pr.batch == 0 || p.num_m_blocks == 0) return;
  if (pr.paged()) {
    launch_prefill_variant<K, In, D, Dv, true>(p, pr);
  } else {
    launch_prefill_variant<K, In, D, Dv, false>(p, pr);
  }
}

// True when the image the runtime loaded for the current device holds the Hopper kernel
// (probed on one instantiation): sm_90 code compiled from sm_90 PTX. sm_80 PTX compiled for a
// Hopper device by the driver also reports binary version 90, but PTX version 80; sm_90 and
// sm_90a report the same, which only the build's list tells apart (cuda/build_archs.hpp).
template <class In, int D, int Dv>
bool prefill_sm90_image_present() {
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, &prefill_sm90_kernel<In, D, Dv, false>) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attr.binaryVersion == 90 && attr.ptxVersion >= 90;
}

// The element type behind each dtype name of the instantiation list.
using bf16 = __nv_bfloat16;
using fp16 = __half;

#define FLASHBUF_INSTANTIATE_PREFILL(dtype, d, dv)                                              \
  template void launch_prefill<PrefillKernel::mma_sync, dtype, d, dv>(const AttentionProblem&); \
  template void launch_prefill<PrefillKernel::wgmma, dtype, d, dv>(const AttentionProblem&);    \
  template bool prefill_sm90_image_present<dtype, d, dv>();
#define FLASHBUF_DECLARE_PREFILL(dtype, d, dv)                                                         \
  extern template void launch_prefill<PrefillKernel::mma_sync, dtype, d, dv>(const AttentionProblem&); \
  extern template void launch_prefill<PrefillKernel::wgmma, dtype, d, dv>(const AttentionProblem&);    \
  extern template bool prefill_sm90_image_present<dtype, d, dv>();

}  // namespace flashbuf::detail
