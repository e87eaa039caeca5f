// kernels: the parameters of the varlen prefill's order prologue (work_order_kernel.cuh), a plain
// struct that host code builds without including the kernel.
#pragma once

#include <cstdint>

namespace flashbuf {

struct WorkOrderParams {
  const std::int32_t* cu_seqlens_q;  // (batch + 1)
  const std::int32_t* cu_seqlens_k;  // (batch + 1), or null
  const std::int32_t* seqlens_k;     // (batch), or null (then seqlen_k for every sequence)
  int seqlen_k;
  int batch;
  int window_left, window_right;
  int block_m, block_n;
  int row_shift;          // query rows per token 1 << row_shift (packed GQA: PrefillParams::pack_shift)
  std::int64_t capacity;  // items the table holds
  std::int32_t* table;    // work_order_entries(capacity) int32
};

}  // namespace flashbuf
