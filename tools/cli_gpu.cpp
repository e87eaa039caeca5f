// The `flashbuf` command line: device copies of host tensors and timing. With CUDA, the CLI
// talks to the CUDA runtime directly (it links cudart through the flashbuf target); without
// it, the GPU parts say so, and CPU timing uses steady_clock.
#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "cli.hpp"

#if defined(FLASHBUF_WITH_CUDA)
#include <cuda_runtime.h>
#endif

namespace flashbuf::cli {

namespace {
double median(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}
// Wall-clock median of `reps` calls (CPU work).
double median_host_time_ms(int reps, const std::function<void()>& call) {
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(std::move(times));
}
}  // namespace

#if defined(FLASHBUF_WITH_CUDA)

namespace {
void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw RuntimeError(std::string("flashbuf CLI: ") + what + ": " + cudaGetErrorString(status));
  }
}

void* upload(std::vector<void*>& allocations, reference::HostTensor& t) {
  if (t.empty() || t.storage_bytes() == 0) return nullptr;
  void* ptr = nullptr;
  check(cudaMalloc(&ptr, t.storage_bytes()), "cudaMalloc");
  allocations.push_back(ptr);
  check(cudaMemcpy(ptr, t.data(), t.storage_bytes(), cudaMemcpyHostToDevice), "copy to the device");
  return ptr;
}
}  // namespace

DeviceTensors::DeviceTensors(reference::AttentionTensors& h, std::size_t workspace_bytes) {
  ptrs_.q = upload(allocations_, h.q);
  ptrs_.k = upload(allocations_, h.k);
  ptrs_.v = upload(allocations_, h.v);
  ptrs_.o = upload(allocations_, h.o);  // poisoned on the host: unwritten outputs stay poison
  ptrs_.lse = upload(allocations_, h.lse);
  ptrs_.cu_seqlens_q = upload(allocations_, h.cu_seqlens_q);
  ptrs_.cu_seqlens_k = upload(allocations_, h.cu_seqlens_k);
  ptrs_.seqlens_k = upload(allocations_, h.seqlens_k);
  ptrs_.page_table = upload(allocations_, h.page_table);
  if (workspace_bytes > 0) {
    check(cudaMalloc(&workspace_, workspace_bytes), "cudaMalloc (decode workspace)");  // 256-byte aligned
    allocations_.push_back(workspace_);
  }
}

DeviceTensors::~DeviceTensors() {
  for (void* p : allocations_) cudaFree(p);
}

void DeviceTensors::download_outputs(reference::AttentionTensors& h) const {
  check(cudaDeviceSynchronize(), "kernel execution");
  if (ptrs_.o) check(cudaMemcpy(h.o.data(), ptrs_.o, h.o.storage_bytes(), cudaMemcpyDeviceToHost), "copy o back");
  if (ptrs_.lse) check(cudaMemcpy(h.lse.data(), ptrs_.lse, h.lse.storage_bytes(), cudaMemcpyDeviceToHost), "copy lse back");
}

void DeviceTensors::poison_outputs(reference::AttentionTensors& h) const {
  h.o.poison();
  if (ptrs_.o) check(cudaMemcpy(ptrs_.o, h.o.data(), h.o.storage_bytes(), cudaMemcpyHostToDevice), "poison o");
  if (!h.lse.empty()) {
    h.lse.poison();
    if (ptrs_.lse) check(cudaMemcpy(ptrs_.lse, h.lse.data(), h.lse.storage_bytes(), cudaMemcpyHostToDevice), "poison lse");
  }
}

void device_synchronize(Device device) {
  if (device == Device::gpu) check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

std::string gpu_name() { return cuda_device_info(0).name; }

double median_time_ms(Device device, int reps, const std::function<void()>& call) {
  if (device != Device::gpu) return median_host_time_ms(reps, call);
  std::vector<double> times;
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  for (int r = 0; r < reps; ++r) {
    check(cudaEventRecord(start, nullptr), "cudaEventRecord");
    call();
    check(cudaEventRecord(stop, nullptr), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "kernel execution");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return median(std::move(times));
}

#else  // no CUDA in this build

DeviceTensors::DeviceTensors(reference::AttentionTensors&, std::size_t) {
  throw RuntimeError("flashbuf CLI: this build has no CUDA; use --backend cpu");
}
DeviceTensors::~DeviceTensors() = default;
void DeviceTensors::download_outputs(reference::AttentionTensors&) const {}
void DeviceTensors::poison_outputs(reference::AttentionTensors&) const {}
void device_synchronize(Device) {}
std::string gpu_name() { return "none"; }

double median_time_ms(Device, int reps, const std::function<void()>& call) { return median_host_time_ms(reps, call); }

#endif

}  // namespace flashbuf::cli
