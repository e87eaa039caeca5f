// The validated, normalised form of an attention call: what every backend (CPU, sm80, decode)
// consumes. Built only by validate_attention(); backends never see an unchecked argument.
// Addresses are computed the same way for batch, varlen and paged inputs (see the helpers).
#pragma once

#include <cstdint>

#include "flashbuf/flashbuf.hpp"

namespace flashbuf::detail {

struct AttentionProblem {
  int batch = 0;
  int heads_q = 0, heads_kv = 0;
  int head_dim = 0, head_dim_v = 0;
  int max_seqlen_q = 0, max_seqlen_k = 0;  // upper bounds over the batch
  int seqlen_q = 0, seqlen_k = 0;          // fixed lengths in batch mode (0 in varlen)
  std::int64_t total_q = 0;                // rows of q and o (varlen: the packed tokens)
  DType dtype = DType::bf16;
  DeviceKind device = DeviceKind::cpu;
  int device_index = 0;

  // Element strides. In varlen mode the batch strides are 0 and rows start at cu_seqlens[b].
  const void* q = nullptr;
  std::int64_t q_batch_stride = 0, q_row_stride = 0, q_head_stride = 0;
  const void* k = nullptr;
  std::int64_t k_batch_stride = 0, k_row_stride = 0, k_head_stride = 0;  // batch = page if paged
  const void* v = nullptr;
  std::int64_t v_batch_stride = 0, v_row_stride = 0, v_head_stride = 0;
  void* o = nullptr;
  std::int64_t o_batch_stride = 0, o_row_stride = 0, o_head_stride = 0;
  float* lse = nullptr;  // lse[b*lse_batch_stride + h*lse_head_stride + q_start(b) + i]
  std::int64_t lse_batch_stride = 0, lse_head_stride = 0;

  const std::int32_t* cu_seqlens_q = nullptr;
  const std::int32_t* cu_seqlens_k = nullptr;
  std::int64_t total_k = 0;  // varlen K/V: rows of the packed tensors (kernels clamp cu_seqlens_k to it)
  const std::int32_t* seqlens_k = nullptr;
  const std::int32_t* page_table = nullptr;
  std::int64_t page_table_stride = 0;
  int page_size = 0;  // 0 = not paged
  int num_pages = 0;

  float softmax_scale = 0.0f;
  float softcap = 0.0f;
  const float* sinks = nullptr;  // optional: one sink logit per query head (heads_q floats)
  int window_left = -1, window_right = -1;  // bottom-right aligned; -1 unbounded
  void* stream = nullptr;

  bool varlen_q() const { return cu_seqlens_q != nullptr; }
  bool paged() const { return page_size > 0; }
};

// Host-side (CPU backend) accessors; device code mirrors them.
inline int q_start(const AttentionProblem& p, int b) { return p.cu_seqlens_q ? p.cu_seqlens_q[b] : 0; }
inline int q_len(const AttentionProblem& p, int b) {
  return p.cu_seqlens_q ? p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b] : p.seqlen_q;
}
// K/V as one (batch, seqlen_k, heads, dim) tensor per operand, every row a key of its
// sequence: what a TMA tensor map can describe (no pages, no per-sequence lengths).
inline bool batch_form_kv(const AttentionProblem& p) {
  return !p.paged() && p.cu_seqlens_k == nullptr && p.seqlens_k == nullptr;
}
inline int k_start(const AttentionProblem& p, int b) { return p.cu_seqlens_k ? p.cu_seqlens_k[b] : 0; }
inline int k_len(const AttentionProblem& p, int b) {
  if (p.cu_seqlens_k) return p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b];
  if (p.seqlens_k) return p.seqlens_k[b];
  return p.seqlen_k;
}
// Element offset of key/value row j (0-based within sequence b) for head h.
inline std::int64_t kv_offset(const AttentionProblem& p, int b, int j, int h, std::int64_t batch_stride,
                              std::int64_t row_stride, std::int64_t head_stride) {
  if (p.page_size > 0) {
    const std::int64_t page = p.page_table[b * p.page_table_stride + j / p.page_size];
    return page * batch_stride + std::int64_t(j % p.page_size) * row_stride + h * head_stride;
  }
  return b * batch_stride + std::int64_t(k_start(p, b) + j) * row_stride + h * head_stride;
}

}  // namespace flashbuf::detail

namespace flashbuf::detail {

// merge_states, normalised: parts (N, T, H, Dv) + lse (N, T, H) -> o (T, H, Dv), lse (T, H).
struct MergeProblem {
  int num_parts = 0, tokens = 0, heads = 0, head_dim_v = 0;
  DType dtype = DType::fp32;      // of o_parts and o (the same)
  DeviceKind device = DeviceKind::cpu;
  int device_index = 0;
  const void* o_parts = nullptr;
  std::int64_t op_part_stride = 0, op_token_stride = 0, op_head_stride = 0;
  const float* lse_parts = nullptr;
  std::int64_t lp_part_stride = 0, lp_token_stride = 0, lp_head_stride = 0;
  void* o = nullptr;
  std::int64_t o_token_stride = 0, o_head_stride = 0;
  float* lse = nullptr;  // optional
  std::int64_t lse_token_stride = 0, lse_head_stride = 0;
  void* stream = nullptr;
};

// append_kv after validation: every view as base pointer and strides (elements).
struct AppendProblem {
  int batch = 0, seqlen_new = 0, heads_kv = 0, head_dim = 0, head_dim_v = 0;
  int cache_rows = 0;      // Bc (contiguous) or P (paged): the caches' first dimension
  int rows_per_entry = 0;  // S (contiguous) or page (paged): their second
  int max_pages = 0;       // paged: page_table's columns; 0 for a contiguous cache
  DType dtype = DType::bf16;
  DeviceKind device = DeviceKind::cpu;
  int device_index = 0;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  std::int64_t kc_stride[3] = {0, 0, 0}, vc_stride[3] = {0, 0, 0};  // first, second, head dimension
  const void* k = nullptr;
  const void* v = nullptr;
  std::int64_t k_stride[3] = {0, 0, 0}, v_stride[3] = {0, 0, 0};    // batch, token, head
  const std::int32_t* cache_seqlens = nullptr;
  const std::int32_t* cache_batch_idx = nullptr;  // optional
  const std::int32_t* page_table = nullptr;       // optional
  std::int64_t page_table_stride = 0;
  void* stream = nullptr;
};

}  // namespace flashbuf::detail
