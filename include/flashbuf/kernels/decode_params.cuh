// kernels, decode: the device-side parameters of the split-KV kernel (the "Params" of a kernel in
// the FlashAttention sense), built by the launcher (src/cuda/decode.cu) from the validated
// problem and the plan.
#pragma once

#include <cstdint>

#include "flashbuf/kernels/decode_config.cuh"

namespace flashbuf::kernels::decode {

// Device-side parameters (built by the launcher from the validated problem and the plan).
struct DecodeParams {
  const void* q = nullptr;
  std::int64_t q_batch_stride = 0, q_row_stride = 0, q_head_stride = 0;
  const void* k = nullptr;
  std::int64_t k_batch_stride = 0, k_row_stride = 0, k_head_stride = 0;  // batch = page if paged
  const void* v = nullptr;
  std::int64_t v_batch_stride = 0, v_row_stride = 0, v_head_stride = 0;
  void* o = nullptr;
  std::int64_t o_batch_stride = 0, o_row_stride = 0, o_head_stride = 0;
  float* lse = nullptr;  // optional: lse[b * lse_batch_stride + h * lse_head_stride + token]
  std::int64_t lse_batch_stride = 0, lse_head_stride = 0;
  // Optional: one natural-log sink logit per query head, joined to each row once, where its
  // final O and LSE are written (store_output: one split, or after the cluster merge); with
  // the workspace merge the combine joins it instead (combine.cuh).
  const float* sinks = nullptr;

  const std::int32_t* seqlens_k = nullptr;
  const std::int32_t* page_table = nullptr;  // null: contiguous cache
  std::int64_t page_table_stride = 0;
  int num_pages = 0;
  FastDivmod page_div{};  // by the page size
  // Paged: the K/V strides of a page and of a row in bytes, 32-bit (the launcher checks they
  // fit), so a row's address is two wide multiply-adds onto the head's base per operand.
  std::uint32_t k_page_bytes = 0, k_row_bytes = 0, v_page_bytes = 0, v_row_bytes = 0;

  int batch = 0, q_per_seq = 1, group = 1, heads_kv = 1, heads_q = 1;
  FastDivmod group_div{};  // packed row -> token (divides by group; no integer division before the copies)
  int kv_capacity = 0;  // every seqlens_k entry is clamped to [0, kv_capacity]
  int num_splits = 1;
  bool deep_ring = false;  // DecodeTile::kDeepStages (paged grids of at most one block per SM)
  int keys_per_split_static = 0;  // split_keys(kv_capacity, num_splits, block_n): the splits without a left window
  SplitMerge merge = SplitMerge::none;  // num_splits > 1: cluster (grid x = one cluster) or workspace

  // Scores in base 2: s = x * score_scale (no softcap), or
  //                   s = tanh(x * score_scale) * softcap_log2 (softcap > 0).
  float score_scale = 0.0f;
  float softcap_log2 = 0.0f;  // softcap * log2(e); 0 = no softcap
  int window_left = -1, window_right = -1;

  // Workspace (num_splits > 1): see decode_config.cuh's workspace_layout.
  float* o_parts = nullptr;
  float* lse_parts = nullptr;

  // A KV head's packed query rows: row gr = token * group + g is query head hkv * group + g
  // of that token.
  struct PackedRow {
    int token, head;
  };
  __device__ PackedRow packed_row(int gr, int hkv) const {
    const int token = group_div.div(gr);
    return {token, hkv * group + (gr - token * group)};
  }
};

}  // namespace flashbuf::kernels::decode
