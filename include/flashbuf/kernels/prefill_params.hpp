// kernels: the device-side parameters of the prefill kernel (the "Params" of a kernel in the
// FlashAttention-3 sense): plain pointers and element strides, built by the launcher from the
// validated detail::AttentionProblem.
#pragma once

#include <cstdint>

#include "flashbuf/core/fast_divmod.hpp"
#include "flashbuf/core/work_items.hpp"

namespace flashbuf {

struct PrefillParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;  // null: not requested
  const float* sinks;  // null: no attention sinks; else one natural-log logit per query head
  std::int64_t q_batch_stride, q_row_stride, q_head_stride;
  std::int64_t k_batch_stride, k_row_stride, k_head_stride;  // batch stride = page stride if paged
  std::int64_t v_batch_stride, v_row_stride, v_head_stride;
  std::int64_t o_batch_stride, o_row_stride, o_head_stride;
  std::int64_t lse_batch_stride, lse_head_stride;
  const std::int32_t* cu_seqlens_q;
  const std::int32_t* cu_seqlens_k;
  const std::int32_t* seqlens_k;
  const std::int32_t* page_table;
  std::int64_t page_table_stride;
  int num_pages;
  FastDivmod page_div;     // by the page size (the launcher's; the kernel needs only the divide)
  int seqlen_q, seqlen_k;  // fixed lengths when not varlen; seqlen_k bounds seqlens_k
  int total_q, total_k;    // varlen: rows of q / o and of k / v, the bounds of cu_seqlens_*
  int heads_q, group;      // group = heads_q / heads_kv
  // GQA packing (the Hopper kernel's varlen launches): 0, or log2(group), when a block's query
  // rows are the tokens of all `group` query heads of one K/V head, heads innermost (row r:
  // token r >> pack_shift, head r & (group - 1) of the group). The grid then counts K/V heads
  // (heads_q >> pack_shift) and its query blocks over group x seqlen_q rows. Never on the
  // persistent grid (core/gqa_packing.hpp).
  int pack_shift;
  int num_m_blocks;
  int num_items;           // persistent grids: query blocks x heads x sequences (else unused)
  float scale_log2;        // multiplies raw scores (after softcap's tanh) into log2 units
  float softcap_inv;       // scale / softcap, or 0 without softcap
  int window_left, window_right;
  // The (query block, head, sequence) grid's order in sections (core/work_items.hpp), or
  // (sections.on() false) the grid's own.
  SectionOrder sections;
  // Blocks per item (a 1-D grid of the grid's heads x the table's capacity, heads innermost) in the
  // longest-first order of core/work_order.hpp; null: the (query block, head, sequence) grid.
  const std::int32_t* item_order;
};

}  // namespace flashbuf
