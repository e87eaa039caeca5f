// kernels: the device prologue of a varlen prefill launch that writes the order table of
// core/work_order.hpp (longest first) from cu_seqlens, so that the launch needs no host
// synchronisation. One block of 1024 threads: a shared histogram of the items' buckets, its
// exclusive scan, and the scatter. A thread walks the query blocks of the sequences
// tid, tid + 1024, ...; the loads of cu_seqlens are the only global reads.
#pragma once

#include <cstdint>

#include "flashbuf/core/mask.hpp"
#include "flashbuf/core/work_order.hpp"
#include "flashbuf/kernels/work_order_params.hpp"

namespace flashbuf {

inline constexpr int kWorkOrderThreads = 1024;
static_assert(kWorkOrderBuckets == kWorkOrderThreads, "the scan gives each thread one bucket");

// A sequence's mask over its query rows (packed: tokens << row_shift), with its lengths read
// as the prefill kernel reads them (PrefillBlock).
__device__ inline MaskParams work_order_mask(const WorkOrderParams& p, int b) {
  const int seqlen_q = p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b];
  const int seqlen_k = p.cu_seqlens_k ? p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b]
                                      : (p.seqlens_k ? p.seqlens_k[b] : p.seqlen_k);
  // (Bad cu_seqlens cannot overflow the shift; PrefillBlock clamps the lengths it runs to total_q.)
  return MaskParams{packed_rows(seqlen_q, p.row_shift), seqlen_k, p.window_left, p.window_right, p.row_shift};
}

__global__ void __launch_bounds__(kWorkOrderThreads) work_order_kernel(const __grid_constant__ WorkOrderParams p) {
  __shared__ int slot[kWorkOrderBuckets];
  __shared__ int total;
  const int tid = static_cast<int>(threadIdx.x);
  slot[tid] = 0;
  __syncthreads();
  for (int b = tid; b < p.batch; b += kWorkOrderThreads) {
    const MaskParams mask = work_order_mask(p, b);
    for (int m = query_blocks(mask.seqlen_q, p.block_m) - 1; m >= 0; --m)
      atomicAdd(&slot[work_bucket(item_key_tiles(mask, m, p.block_m, p.block_n))], 1);
  }
  __syncthreads();
  // Inclusive scan (Hillis-Steele over the 1024 buckets), then shifted to exclusive starts.
  int count = slot[tid];
  for (int step = 1; step < kWorkOrderBuckets; step *= 2) {
    const int add = tid >= step ? slot[tid - step] : 0;
    __syncthreads();
    slot[tid] += add;
    __syncthreads();
  }
  const int inclusive = slot[tid];
  if (tid == kWorkOrderBuckets - 1) total = inclusive;
  __syncthreads();
  slot[tid] = inclusive - count;
  __syncthreads();
  for (int b = tid; b < p.batch; b += kWorkOrderThreads) {
    const MaskParams mask = work_order_mask(p, b);
    for (int m = query_blocks(mask.seqlen_q, p.block_m) - 1; m >= 0; --m) {
      const int rank = atomicAdd(&slot[work_bucket(item_key_tiles(mask, m, p.block_m, p.block_n))], 1);
      if (rank < p.capacity) {  // cu_seqlens past the query rows: the items beyond do not run
        p.table[1 + 2 * static_cast<std::int64_t>(rank)] = b;
        p.table[2 + 2 * static_cast<std::int64_t>(rank)] = m;
      }
    }
  }
  if (tid == 0) p.table[0] = static_cast<std::int32_t>(total < p.capacity ? total : p.capacity);
}

}  // namespace flashbuf
