// CUDA runtime queries behind the API: is there a GPU, what is it, where does a pointer live,
// and the one device-to-host copy validation may make (never while a graph is captured).
#include <cuda_runtime.h>

#include <limits>

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

bool cuda_copy_rows_to_host_if_not_capturing(void* dst, const void* src, std::size_t row_bytes, std::size_t rows,
                                             std::size_t src_pitch, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  FLASHBUF_CUDA_CHECK(cudaStreamIsCapturing(s, &status));
  if (status != cudaStreamCaptureStatusNone) return false;
  // One pitched copy; pitches past the copy engine's limit (2^31 - 1 bytes) a copy a row, still
  // one synchronisation.
  if (src_pitch <= static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    FLASHBUF_CUDA_CHECK(cudaMemcpy2DAsync(dst, row_bytes, src, src_pitch, row_bytes, rows, cudaMemcpyDeviceToHost, s));
  } else {
    for (std::size_t r = 0; r < rows; ++r) {
      FLASHBUF_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + r * row_bytes,
                                          static_cast<const char*>(src) + r * src_pitch, row_bytes,
                                          cudaMemcpyDeviceToHost, s));
    }
  }
  FLASHBUF_CUDA_CHECK(cudaStreamSynchronize(s));
  return true;
}

}  // namespace flashbuf::detail
