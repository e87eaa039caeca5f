// The varlen prefill's order prologue: one block (kernels/work_order_kernel.cuh), compiled once.
#include "cuda/work_order.hpp"

#include "cuda/check.cuh"
#include "flashbuf/kernels/work_order_kernel.cuh"

namespace flashbuf::detail {

void launch_work_order(const WorkOrderParams& params, cudaStream_t stream) {
  work_order_kernel<<<1, kWorkOrderThreads, 0, stream>>>(params);
  FLASHBUF_CUDA_CHECK(cudaGetLastError());
}

}  // namespace flashbuf::detail
