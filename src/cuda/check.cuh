// CUDA error checking for the launchers: every runtime call is checked, and a failure becomes
// a flashbuf::RuntimeError naming the call and the CUDA error. The two errors that mean "this
// machine has no GPU we can use" (no driver or one too old for this runtime, no device) say
// so in those words, wherever they surface first.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "flashbuf/flashbuf.hpp"

namespace flashbuf::detail {

// The user-facing reason for an error that means no GPU is usable; empty for other errors.
inline std::string cuda_no_gpu_reason(cudaError_t err) {
  switch (err) {
    case cudaErrorInsufficientDriver:
      return "no usable CUDA GPU: no NVIDIA driver is loaded, or it is older than the CUDA " +
             std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10) +
             " runtime this build uses (" + cudaGetErrorString(err) + ")";
    case cudaErrorNoDevice:
      return std::string("no usable CUDA GPU: the NVIDIA driver reports no CUDA device (") +
             cudaGetErrorString(err) + ")";
    default:
      return {};
  }
}

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* call) {
  cudaGetLastError();  // clear a sticky error so later calls report their own
  const std::string no_gpu = cuda_no_gpu_reason(err);
  if (!no_gpu.empty()) throw RuntimeError(no_gpu + "; use CPU tensors on this machine");
  throw RuntimeError(std::string("CUDA error in ") + call + ": " + cudaGetErrorString(err));
}

}  // namespace flashbuf::detail

#define FLASHBUF_CUDA_CHECK(call)                                           \
  do {                                                                      \
    const cudaError_t flashbuf_err_ = (call);                               \
    if (flashbuf_err_ != cudaSuccess) ::flashbuf::detail::throw_cuda_error(flashbuf_err_, #call); \
  } while (0)
