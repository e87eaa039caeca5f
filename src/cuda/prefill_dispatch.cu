// Dispatch of prefill (either kernel) to its instantiations. The list of instantiations is
// generated from FLASHBUF_INSTANTIATIONS (cmake/instantiations.cmake); the kernels themselves
// are compiled in the generated units, declared `extern template` here.
#include "api/backends.hpp"
#include "cuda/build_archs.hpp"
#include "cuda/device_cache.hpp"
#include "cuda/prefill_launch.cuh"
#include "instantiation_list.hpp"

namespace flashbuf::detail {

FLASHBUF_FOR_EACH_INSTANTIATION(FLASHBUF_DECLARE_PREFILL)

bool prefill_instantiated(DType dtype, int head_dim, int head_dim_v) {
#define FLASHBUF_MATCH(dt, d, dv) \
  if (dtype == DType::dt && head_dim == d && head_dim_v == dv) return true;
  FLASHBUF_FOR_EACH_INSTANTIATION(FLASHBUF_MATCH)
#undef FLASHBUF_MATCH
  return false;
}

namespace {

template <PrefillKernel K>
void run_prefill(const AttentionProblem& p) {
  FLASHBUF_CUDA_CHECK(cudaSetDevice(p.device_index));
#define FLASHBUF_LAUNCH(dt, d, dv)                                    \
  if (p.dtype == DType::dt && p.head_dim == d && p.head_dim_v == dv) { \
    launch_prefill<K, dt, d, dv>(p);                                   \
    return;                                                            \
  }
  FLASHBUF_FOR_EACH_INSTANTIATION(FLASHBUF_LAUNCH)
#undef FLASHBUF_LAUNCH
  throw RuntimeError("prefill: no instantiation for this dtype/head dim (validation should have rejected it)");
}

}  // namespace

void sm80_attention(const AttentionProblem& p) { run_prefill<PrefillKernel::mma_sync>(p); }

void sm90_attention(const AttentionProblem& p) { run_prefill<PrefillKernel::wgmma>(p); }

bool sm90_prefill_available(int device_index) {
  // Compute capability 9.0 and sm_90a code in this binary (the architecture list, then the
  // image the runtime loaded); probed once per device.
  static PerDevice<int> cached;  // 1 yes, 2 no
  const int answer = once_per_device(cached, device_index, [device_index] {
    bool ok = false;
    cudaDeviceProp prop{};
    if (archs_hold_sm90a(FLASHBUF_BUILD_ARCHS) && cudaGetDeviceProperties(&prop, device_index) == cudaSuccess &&
        prop.major == 9 && prop.minor == 0) {
#define FLASHBUF_PROBE(dt, d, dv) ok = ok || prefill_sm90_image_present<dt, d, dv>();
      FLASHBUF_FOR_EACH_INSTANTIATION(FLASHBUF_PROBE)
#undef FLASHBUF_PROBE
    }
    cudaGetLastError();
    return ok ? 1 : 2;
  });
  return answer == 1;
}

}  // namespace flashbuf::detail
