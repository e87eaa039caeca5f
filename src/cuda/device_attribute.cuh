// A device attribute (cudaDeviceGetAttribute), asked once per device and kept: the launchers
// run inside graph captures too, where fewer runtime calls are safer and cheaper.
#pragma once

#include <cuda_runtime.h>

#include <atomic>

#include "cuda/check.cuh"

namespace flashbuf::detail {

template <cudaDeviceAttr Attr>
int cached_device_attribute(int device) {
  static std::atomic<int> cache[64] = {};  // 0: not asked yet (no attribute asked here is 0)
  const bool cacheable = device >= 0 && device < 64;
  int value = cacheable ? cache[device].load(std::memory_order_relaxed) : 0;
  if (value == 0) {
    FLASHBUF_CUDA_CHECK(cudaDeviceGetAttribute(&value, Attr, device));
    if (cacheable) cache[device].store(value, std::memory_order_relaxed);
  }
  return value;
}

}  // namespace flashbuf::detail
