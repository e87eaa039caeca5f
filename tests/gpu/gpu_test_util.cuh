// Shared helpers of the GPU tests: skip visibly where no GPU is present, check CUDA calls,
// a small owning device buffer, and tuning overrides for a scope.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "flashbuf/tuning.hpp"

#define FLASHBUF_REQUIRE_GPU()                                                  \
  do {                                                                          \
    int count_ = 0;                                                             \
    if (cudaGetDeviceCount(&count_) != cudaSuccess || count_ == 0) {            \
      cudaGetLastError();                                                       \
      GTEST_SKIP() << "no CUDA GPU on this machine: GPU test skipped";          \
    }                                                                           \
  } while (0)

// The call runs once; its error, if any, is named in the failure.
#define CUDA_OK(call)                                                                      \
  do {                                                                                     \
    const cudaError_t err_ = (call);                                                       \
    ASSERT_EQ(cudaSuccess, err_) << #call << " failed: " << cudaGetErrorString(err_);      \
  } while (0)

template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  std::size_t count = 0;
  explicit DeviceBuffer(std::size_t n) : count(n) {
    if (cudaMalloc(&ptr, n * sizeof(T) + 16) != cudaSuccess) ptr = nullptr;
  }
  DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void upload(const std::vector<T>& host) {
    cudaMemcpy(ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  std::vector<T> download() const {
    std::vector<T> host(count);
    cudaMemcpy(host.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }
};

// Sets tuning overrides (flashbuf/tuning.hpp) for a scope and restores the previous ones.
class ScopedTuning {
 public:
  explicit ScopedTuning(const flashbuf::TuningOverrides& overrides) : old_(flashbuf::tuning_overrides()) {
    flashbuf::set_tuning_overrides(overrides);
  }
  ~ScopedTuning() { flashbuf::set_tuning_overrides(old_); }
  ScopedTuning(const ScopedTuning&) = delete;
  ScopedTuning& operator=(const ScopedTuning&) = delete;

 private:
  flashbuf::TuningOverrides old_;
};
