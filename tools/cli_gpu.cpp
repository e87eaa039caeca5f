// The `flashbuf` command line: device copies of host tensors, timing, and the ceilings of the
// GPU it runs on. With CUDA, the CLI talks to the CUDA runtime directly (it links cudart
// through the flashbuf target, and cuBLAS for the matrix-rate ceiling where the toolkit has
// it); without it, the GPU parts say so, and CPU timing uses steady_clock.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>
#include <vector>

#include "cli.hpp"

#if defined(FLASHBUF_WITH_CUDA)
#include <cuda_runtime.h>
#if defined(FLASHBUF_CLI_WITH_CUBLAS)
#include <cublas_v2.h>
#endif
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

// ---- the GPU's ceilings ---------------------------------------------------------------------

namespace {

// Dense bf16 tensor-core multiply-adds (fp32 accumulation) per SM and clock, counted as two
// FLOPs each: the vendor's published peaks divided by SM count and boost clock. 0: unknown.
int dense_bf16_flops_per_sm_clock(int major, int minor) {
  if (major == 8 && minor == 0) return 2048;  // A100
  if (major == 8) return 1024;                // A10/A40/L40 class (GeForce parts: half, at fp32 accumulation)
  if (major == 9) return 4096;                // H100/H200
  if (major == 10) return 8192;               // B200 class
  return 0;
}

int device_attribute(cudaDeviceAttr attribute, int device) {
  int value = 0;
  check(cudaDeviceGetAttribute(&value, attribute, device), "cudaDeviceGetAttribute");
  return value;
}

// Best time in ms of `reps` calls of `call`, CUDA-event timed on the default stream.
double best_event_ms(int reps, const std::function<void()>& call) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    check(cudaEventRecord(start, nullptr), "cudaEventRecord");
    call();
    check(cudaEventRecord(stop, nullptr), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "ceiling measurement");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    best = std::min(best, static_cast<double>(ms));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

// Device-to-device copy rate, bytes read + written (docs/BENCH.md's second ceiling), over a
// buffer far larger than L2.
double measure_copy_rate(std::size_t bytes) {
  void *a = nullptr, *b = nullptr;
  check(cudaMalloc(&a, bytes), "cudaMalloc (copy ceiling)");
  if (cudaMalloc(&b, bytes) != cudaSuccess) {
    cudaFree(a);
    check(cudaErrorMemoryAllocation, "cudaMalloc (copy ceiling)");
  }
  check(cudaMemset(a, 0, bytes), "cudaMemset");
  const double ms = best_event_ms(10, [&] { check(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, nullptr), "copy"); });
  cudaFree(a);
  cudaFree(b);
  return 2.0 * bytes / (ms * 1e-3);
}

#if defined(FLASHBUF_CLI_WITH_CUBLAS)
void check_blas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw RuntimeError(std::string("flashbuf CLI: ") + what + ": cuBLAS status " + std::to_string(int(status)));
  }
}

// The dense bf16 matrix rate: an 8192^3 product with fp32 accumulation (docs/BENCH.md).
double measure_gemm_rate() {
  constexpr int n = 8192;
  const std::size_t bytes = std::size_t(n) * n * 2;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  check(cudaMalloc(&a, bytes), "cudaMalloc (gemm ceiling)");
  check(cudaMalloc(&b, bytes), "cudaMalloc (gemm ceiling)");
  check(cudaMalloc(&c, bytes), "cudaMalloc (gemm ceiling)");
  check(cudaMemset(a, 0x3c, bytes), "cudaMemset");  // bf16 0x3c3c ~ 0.0115: finite, not zero
  check(cudaMemset(b, 0x3c, bytes), "cudaMemset");
  cublasHandle_t handle;
  check_blas(cublasCreate(&handle), "cublasCreate");
  const float alpha = 1.0f, beta = 0.0f;
  auto gemm = [&] {
    check_blas(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, CUDA_R_16BF, n, b, CUDA_R_16BF, n,
                            &beta, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
  };
  gemm();  // warm-up: heuristics, clocks
  const double ms = best_event_ms(10, gemm);
  cublasDestroy(handle);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return 2.0 * double(n) * n * n / (ms * 1e-3);
}

// Device-memory read rate: the sum of |x| over a buffer far larger than L2 reads each byte once
// and writes one number (docs/BENCH.md's read ceiling is a row sum, the same traffic).
double measure_read_rate(std::size_t bytes) {
  const std::size_t n = bytes / sizeof(float);
  float* x = nullptr;
  check(cudaMalloc(&x, n * sizeof(float)), "cudaMalloc (read ceiling)");
  check(cudaMemset(x, 0, n * sizeof(float)), "cudaMemset");
  cublasHandle_t handle;
  check_blas(cublasCreate(&handle), "cublasCreate");
  float* result = nullptr;
  check(cudaMalloc(&result, sizeof(float)), "cudaMalloc");
  check_blas(cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_DEVICE), "cublasSetPointerMode");
  // cuBLAS takes an int count: sum in pieces of at most 2^30 floats.
  auto read_all = [&] {
    for (std::size_t at = 0; at < n; at += std::size_t(1) << 30) {
      const int count = static_cast<int>(std::min<std::size_t>(n - at, std::size_t(1) << 30));
      check_blas(cublasSasum(handle, count, x + at, 1, result), "cublasSasum");
    }
  };
  read_all();
  const double ms = best_event_ms(10, read_all);
  cublasDestroy(handle);
  cudaFree(result);
  cudaFree(x);
  return n * sizeof(float) / (ms * 1e-3);
}
#endif

}  // namespace

Ceilings gpu_ceilings() {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  const int sms = device_attribute(cudaDevAttrMultiProcessorCount, device);
  const double clock_hz = device_attribute(cudaDevAttrClockRate, device) * 1e3;
  const double mem_clock_hz = device_attribute(cudaDevAttrMemoryClockRate, device) * 1e3;
  const int bus_bits = device_attribute(cudaDevAttrGlobalMemoryBusWidth, device);
  const int major = device_attribute(cudaDevAttrComputeCapabilityMajor, device);
  const int minor = device_attribute(cudaDevAttrComputeCapabilityMinor, device);
  Ceilings c{};
  c.peak_flops = double(sms) * clock_hz * dense_bf16_flops_per_sm_clock(major, minor);
  c.peak_bytes_per_s = 2.0 * mem_clock_hz * bus_bits / 8;  // double data rate
  // Buffers of 2 GiB (4 for the read), or what a smaller device can spare.
  std::size_t free_bytes = 0, total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  const std::size_t copy_bytes = std::min<std::size_t>(std::size_t(2) << 30, free_bytes / 4);
  const double copy = measure_copy_rate(copy_bytes);
  char peak[200];
  std::snprintf(peak, sizeof peak, "properties: %d SMs at %.0f MHz%s, %.2f TB/s (%d-bit bus at %.0f MHz)", sms,
                clock_hz / 1e6, c.peak_flops > 0 ? "" : " (matrix rate unknown for this architecture)",
                c.peak_bytes_per_s / 1e12, bus_bits, mem_clock_hz / 1e6);
  char how[512];
#if defined(FLASHBUF_CLI_WITH_CUBLAS)
  c.flops = measure_gemm_rate();
  c.bytes_per_s = measure_read_rate(std::min<std::size_t>(std::size_t(4) << 30, free_bytes / 2));
  std::snprintf(how, sizeof how,
                "GPU ceilings measured now: %.0f TFLOP/s dense bf16 (cuBLAS 8192^3), %.2f TB/s read (cuBLAS sum of "
                "|x|), %.2f TB/s device copy; %s",
                c.flops / 1e12, c.bytes_per_s / 1e12, copy / 1e12, peak);
#else
  // Without cuBLAS no matrix product is at hand: the properties' figure, and the copy rate.
  c.flops = c.peak_flops > 0 ? c.peak_flops : 1e12;
  c.bytes_per_s = copy;
  std::snprintf(how, sizeof how,
                "GPU ceilings: %.0f TFLOP/s dense bf16 from the %s (no cuBLAS in this build to measure it), %.2f TB/s "
                "device copy measured now",
                c.flops / 1e12, peak, copy / 1e12);
#endif
  c.how = how;
  return c;
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
Ceilings gpu_ceilings() { throw RuntimeError("flashbuf CLI: this build has no CUDA; use --backend cpu"); }

double median_time_ms(Device, int reps, const std::function<void()>& call) { return median_host_time_ms(reps, call); }

#endif

}  // namespace flashbuf::cli
