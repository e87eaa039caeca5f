// CUDA runtime queries behind the API: is there a GPU, what is it, where does a pointer live,
// and the one device-to-host copy validation may make (never while a graph is captured).
#include <cuda_runtime.h>

#include "api/backends.hpp"
#include "cuda/check.cuh"

namespace flashbuf::detail {

bool cuda_runtime_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return false;
  }
  return count > 0;
}

DeviceInfo cuda_query_device(int device_index) {
  int count = 0;
  FLASHBUF_CUDA_CHECK(cudaGetDeviceCount(&count));  // no driver or no device: says so
  if (device_index < 0 || device_index >= count) {
    throw RuntimeError("cuda:" + std::to_string(device_index) + " does not exist: this machine has " +
                       std::to_string(count) + " CUDA device(s)");
  }
  cudaDeviceProp prop{};
  FLASHBUF_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_index));
  DeviceInfo info;
  info.name = prop.name;
  info.major = prop.major;
  info.minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  return info;
}

bool cuda_pointer_on_device(const void* ptr, int* device_index) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) {
    if (device_index) *device_index = attr.device;
    return true;
  }
  return false;
}

bool cuda_copy_to_host_if_not_capturing(void* dst, const void* src, std::size_t bytes, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  FLASHBUF_CUDA_CHECK(cudaStreamIsCapturing(s, &status));
  if (status != cudaStreamCaptureStatusNone) return false;
  FLASHBUF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
  FLASHBUF_CUDA_CHECK(cudaStreamSynchronize(s));
  return true;
}

}  // namespace flashbuf::detail
