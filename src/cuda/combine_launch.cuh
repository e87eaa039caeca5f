// The combine kernel's host side: the vector-width check, the per-(kernel, device) query for
// programmatic dependent launch, and the launcher that merge_states (src/cuda/merge.cu) and
// the decode's workspace merge (src/cuda/decode.cu) call. The kernel is device code in
// kernels/combine.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/device_cache.hpp"
#include "flashbuf/core/config.hpp"
#include "flashbuf/kernels/combine.cuh"

namespace flashbuf::kernels::combine {

// True when every part/output row may be read and written kVec = 4 elements at a time.
inline bool combine_vec4_ok(const CombineParams& p, std::size_t in_bytes, std::size_t out_bytes) {
  auto aligned = [](const void* ptr, std::size_t bytes) {
    return reinterpret_cast<std::uintptr_t>(ptr) % bytes == 0;
  };
  const std::int64_t strides[] = {p.op_part_stride, p.op_token_stride, p.op_head_stride,
                                  p.o_outer_stride, p.o_inner_stride, p.o_head_stride};
  for (std::int64_t s : strides) {
    if (s % 4 != 0) return false;
  }
  return p.head_dim_v % 4 == 0 && aligned(p.o_parts, 4 * in_bytes) && aligned(p.o, 4 * out_bytes);
}

// Programmatic launch is safe only when the code that runs was compiled for sm_90+ (an
// sm_80 build JIT-compiled on Hopper has no griddepcontrol.wait and would race). Asked once
// per (kernel, device) — the binary loaded, hence ptxVersion, depends on the device — and
// cached in a static member keyed on the kernel's template arguments (every combine kernel
// has the same function type, so a cache keyed on the type would answer for all of them).
template <class TIn, class TOut, int kVec>
struct CombineState {
  static inline ::flashbuf::detail::PerDevice<int> griddepcontrol;  // 1 no, 2 yes
};

template <class TIn, class TOut, int kVec>
bool has_griddepcontrol(int device) {
  auto& cache = CombineState<TIn, TOut, kVec>::griddepcontrol;
  const int answer = ::flashbuf::detail::once_per_device(cache, device, [] {
    cudaFuncAttributes attributes{};
    const cudaError_t err = cudaFuncGetAttributes(&attributes, &combine_kernel<TIn, TOut, kVec>);
    if (err != cudaSuccess) {
      cudaGetLastError();  // leave no pending error; the launch reports its own
      return 0;            // no PDL now, and asked again next time
    }
    return attributes.ptxVersion >= 90 ? 2 : 1;
  });
  return answer == 2;
}

// Asks (and caches) everything launch_combine may ask on `device` (the current device), so a
// later launch inside a CUDA graph capture makes no query. Called by the decode plan.
template <class TIn, class TOut>
void prepare_combine(int device) {
  (void)has_griddepcontrol<TIn, TOut, 4>(device);
  (void)has_griddepcontrol<TIn, TOut, 1>(device);
}

// Launch on `device` (the current device). `programmatic`: launched right after the grid
// that writes the parts, with programmatic stream serialisation (sm_90+), so this grid's
// launch overlaps that grid's tail; the kernel's griddepcontrol.wait keeps the data dependency.
template <class TIn, class TOut>
cudaError_t launch_combine(const CombineParams& p, cudaStream_t stream, bool programmatic, int device) {
  const std::int64_t rows = static_cast<std::int64_t>(p.tokens) * p.heads;
  if (rows == 0) return cudaSuccess;
  const std::int64_t blocks = ceil_div<std::int64_t>(rows, kWarpsPerBlock);
  if (blocks > 0x7fffffff) return cudaErrorInvalidConfiguration;
  const bool vec4 = combine_vec4_ok(p, sizeof(TIn), sizeof(TOut));
  auto* kernel = vec4 ? &combine_kernel<TIn, TOut, 4> : &combine_kernel<TIn, TOut, 1>;
  const bool pdl = programmatic && (vec4 ? has_griddepcontrol<TIn, TOut, 4>(device)
                                         : has_griddepcontrol<TIn, TOut, 1>(device));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, p);
}

}  // namespace flashbuf::kernels::combine
