// The prefill launcher: AttentionProblem -> PrefillParams -> kernel launch. Compiled once per
// (dtype, D, Dv) in the generated units (cmake/instantiations.cmake); every other unit sees
// only the declaration, so no kernel is compiled twice.
#pragma once

#include <cuda_runtime.h>

#include "api/problem.hpp"
#include "cuda/check.cuh"
#include "flashbuf/kernels/prefill_sm80.cuh"
#include "flashbuf/kernels/prefill_sm90.cuh"

namespace flashbuf::detail {

template <class In, int D, int Dv>
void launch_prefill_sm80(const AttentionProblem& pr);

template <class In, int D, int Dv, bool Paged, class Tile = TableTile<D, Dv>>
void launch_prefill_sm80_variant(const PrefillParams& params, int grid_m, int heads, int batch,
                                 cudaStream_t stream) {
  using Kernel = PrefillSm80<In, D, Dv, Paged, Tile>;
  auto* kernel = &prefill_sm80_kernel<In, D, Dv, Paged, Tile>;
  FLASHBUF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           Kernel::kSmemBytes));
  const dim3 grid(grid_m, heads, batch);
  kernel<<<grid, Kernel::kThreads, Kernel::kSmemBytes, stream>>>(params);
  FLASHBUF_CUDA_CHECK(cudaGetLastError());
}

inline PrefillParams make_prefill_params(const AttentionProblem& pr, int block_m) {
  PrefillParams p{};
  p.q = pr.q;
  p.k = pr.k;
  p.v = pr.v;
  p.o = pr.o;
  p.lse = pr.lse;
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
  p.page_size = pr.page_size;
  p.num_pages = pr.num_pages;
  p.seqlen_q = pr.seqlen_q;
  p.seqlen_k = pr.seqlen_k;
  p.heads_q = pr.heads_q;
  p.group = pr.heads_q / pr.heads_kv;
  p.num_m_blocks = (pr.max_seqlen_q + block_m - 1) / block_m;
  // With softcap the kernel computes tanh(s * scale / softcap) and the softmax runs on
  // softcap * tanh(...); without it the scale folds into the exp2 argument.
  p.softcap_inv = pr.softcap > 0.0f ? pr.softmax_scale / pr.softcap : 0.0f;
  p.scale_log2 = (pr.softcap > 0.0f ? pr.softcap : pr.softmax_scale) * kLog2e;
  p.window_left = pr.window_left;
  p.window_right = pr.window_right;
  return p;
}

template <class In, int D, int Dv>
void launch_prefill_sm80(const AttentionProblem& pr) {
  const PrefillParams p = make_prefill_params(pr, prefill_tile(D, Dv).block_m);
  if (pr.batch == 0 || p.num_m_blocks == 0) return;
  auto stream = static_cast<cudaStream_t>(pr.stream);
  if (pr.paged()) {
    launch_prefill_sm80_variant<In, D, Dv, true>(p, p.num_m_blocks, pr.heads_q, pr.batch, stream);
  } else {
    launch_prefill_sm80_variant<In, D, Dv, false>(p, p.num_m_blocks, pr.heads_q, pr.batch, stream);
  }
}

// The Hopper kernel (wgmma): built into every unit, runnable where the sm_90a image exists.
template <class In, int D, int Dv, bool Paged>
void launch_prefill_sm90_variant(const PrefillParams& params, int grid_m, int heads, int batch,
                                 cudaStream_t stream) {
  using Kernel = PrefillSm90<In, D, Dv, Paged>;
  auto* kernel = &prefill_sm90_kernel<In, D, Dv, Paged>;
  FLASHBUF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           Kernel::kSmemBytes));
  kernel<<<dim3(grid_m, heads, batch), Kernel::kThreads, Kernel::kSmemBytes, stream>>>(params);
  FLASHBUF_CUDA_CHECK(cudaGetLastError());
}

template <class In, int D, int Dv>
void launch_prefill_sm90(const AttentionProblem& pr) {
  const PrefillParams p = make_prefill_params(pr, PrefillSm90<In, D, Dv, false>::kBM);
  if (pr.batch == 0 || p.num_m_blocks == 0) return;
  auto stream = static_cast<cudaStream_t>(pr.stream);
  if (pr.paged()) {
    launch_prefill_sm90_variant<In, D, Dv, true>(p, p.num_m_blocks, pr.heads_q, pr.batch, stream);
  } else {
    launch_prefill_sm90_variant<In, D, Dv, false>(p, p.num_m_blocks, pr.heads_q, pr.batch, stream);
  }
}

// True when this binary holds sm_90a code for the Hopper kernel (probed on one instantiation).
template <class In, int D, int Dv>
bool prefill_sm90_image_present() {
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, &prefill_sm90_kernel<In, D, Dv, false>) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attr.binaryVersion == 90;
}

// The element type behind each dtype name of the instantiation list.
using bf16 = __nv_bfloat16;
using fp16 = __half;

#define FLASHBUF_INSTANTIATE_PREFILL(dtype, d, dv)                           \
  template void launch_prefill_sm80<dtype, d, dv>(const AttentionProblem&); \
  template void launch_prefill_sm90<dtype, d, dv>(const AttentionProblem&); \
  template bool prefill_sm90_image_present<dtype, d, dv>();
#define FLASHBUF_DECLARE_PREFILL(dtype, d, dv)                                     \
  extern template void launch_prefill_sm80<dtype, d, dv>(const AttentionProblem&); \
  extern template void launch_prefill_sm90<dtype, d, dv>(const AttentionProblem&); \
  extern template bool prefill_sm90_image_present<dtype, d, dv>();

}  // namespace flashbuf::detail
