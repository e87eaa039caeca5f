// A device attribute (cudaDeviceGetAttribute), asked once per device and kept: the launchers
// run inside graph captures too, where fewer runtime calls are safer and cheaper.
#pragma once

#include <cuda_runtime.h>

#include "cuda/check.cuh"
#include "cuda/device_cache.hpp"

namespace flashbuf::detail {

template <cudaDeviceAttr Attr>
int cached_device_attribute(int device) {
  static PerDevice<int> cache;  // no attribute asked here is 0, so 0 can mean "not asked yet"
  return once_per_device(cache, device, [device] {
    int value = 0;
    FLASHBUF_CUDA_CHECK(cudaDeviceGetAttribute(&value, Attr, device));
    return value;
  });
}

}  // namespace flashbuf::detail
