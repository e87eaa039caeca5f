// The CUDA merge_states backend: the combine kernel of kernels/combine.cuh on the validated
// MergeProblem (the same kernel the decode's split-KV combine runs).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "api/backends.hpp"
#include "cuda/check.cuh"
#include "cuda/combine_launch.cuh"

namespace flashbuf::detail {

void cuda_merge_states(const MergeProblem& p) {
  namespace ck = ::flashbuf::kernels::combine;
  if (p.tokens <= 0 || p.heads <= 0) return;
  int previous = 0;
  FLASHBUF_CUDA_CHECK(cudaGetDevice(&previous));
  if (previous != p.device_index) FLASHBUF_CUDA_CHECK(cudaSetDevice(p.device_index));
  ck::CombineParams c;
  c.num_parts = p.num_parts;
  c.tokens = p.tokens;
  c.tokens_inner = p.tokens;  // one level: o (T, H, Dv), lse (T, H)
  c.heads = p.heads;
  c.head_dim_v = p.head_dim_v;
  c.o_parts = p.o_parts;
  c.op_part_stride = p.op_part_stride;
  c.op_token_stride = p.op_token_stride;
  c.op_head_stride = p.op_head_stride;
  c.lse_parts = p.lse_parts;
  c.lp_part_stride = p.lp_part_stride;
  c.lp_token_stride = p.lp_token_stride;
  c.lp_head_stride = p.lp_head_stride;
  c.o = p.o;
  c.o_outer_stride = 0;
  c.o_inner_stride = p.o_token_stride;
  c.o_head_stride = p.o_head_stride;
  c.lse = p.lse;
  c.lse_outer_stride = 0;
  c.lse_inner_stride = p.lse_token_stride;
  c.lse_head_stride = p.lse_head_stride;
  const cudaStream_t stream = static_cast<cudaStream_t>(p.stream);
  cudaError_t err = cudaErrorInvalidValue;
  switch (p.dtype) {
    case DType::bf16: err = ck::launch_combine<__nv_bfloat16, __nv_bfloat16>(c, stream, false, p.device_index); break;
    case DType::fp16: err = ck::launch_combine<__half, __half>(c, stream, false, p.device_index); break;
    case DType::fp32: err = ck::launch_combine<float, float>(c, stream, false, p.device_index); break;
    default: break;
  }
  if (previous != p.device_index) cudaSetDevice(previous);
  FLASHBUF_CUDA_CHECK(err);
}

}  // namespace flashbuf::detail
