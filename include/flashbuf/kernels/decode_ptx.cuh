// Kernels layer, decode: the few PTX wrappers the decode and combine kernels need that
// arch/sm80 does not provide (yet): MUFU.EX2 and programmatic dependent launch. Kept here,
// named after their instructions, until the lead moves them to arch/ (ex2 -> sm80/math.cuh,
// griddepcontrol -> sm90/griddepcontrol.cuh).
#pragma once

#include <cstdint>

namespace flashbuf::kernels::decode::ptx {

// ex2.approx.ftz.f32: 2^x in one MUFU op (ex2(-inf) = +0, relied upon by the softmax).
__device__ __forceinline__ float ex2_approx_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// griddepcontrol.wait: block until the grid this one depends on (launched with
// programmatic stream serialisation) has completed and its writes are visible. A no-op
// without the launch attribute, and not available before sm_90 (nothing to wait for).
__device__ __forceinline__ void griddepcontrol_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// griddepcontrol.launch_dependents: let the dependent grid start launching (its blocks then
// sit in griddepcontrol.wait), hiding its launch latency behind this grid's tail.
__device__ __forceinline__ void griddepcontrol_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

}  // namespace flashbuf::kernels::decode::ptx
