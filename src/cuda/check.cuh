// CUDA error checking for the launchers: every runtime call is checked, and a failure becomes
// a flashbuf::RuntimeError naming the call and the CUDA error.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "flashbuf/flashbuf.hpp"

#define FLASHBUF_CUDA_CHECK(call)                                                          \
  do {                                                                                     \
    const cudaError_t flashbuf_err_ = (call);                                              \
    if (flashbuf_err_ != cudaSuccess)                                                      \
      throw ::flashbuf::RuntimeError(std::string("CUDA error in ") + #call + ": " +       \
                                     cudaGetErrorString(flashbuf_err_));                   \
  } while (0)
