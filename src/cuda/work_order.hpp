// The longest-first order of a varlen prefill's query blocks (core/work_order.hpp), computed on
// the launch's stream by the device prologue of kernels/work_order_kernel.cuh.
#pragma once

#include <cuda_runtime.h>

#include "flashbuf/kernels/work_order_params.hpp"

namespace flashbuf::detail {

// Enqueues the prologue that fills params.table on `stream`.
void launch_work_order(const WorkOrderParams& params, cudaStream_t stream);

}  // namespace flashbuf::detail
