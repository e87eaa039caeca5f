// arch/sm90: griddepcontrol — programmatic dependent launch (PDL) between two grids of one
// stream (sm90+). One PTX family per file; wrappers are named after the instruction they emit.
//
// Unlike the other arch/sm90 headers this one also compiles for older targets, where both
// wrappers are no-ops: a kernel compiled for sm_80 that uses them is still correct (it just
// never overlaps), and the host decides whether to launch with the PDL attribute at all
// (src/cuda/combine_launch.cuh asks the kernel's ptxVersion).
#pragma once

namespace flashbuf::sm90 {

// griddepcontrol.wait: blocks until every grid this one depends on (launched before it with
// cudaLaunchAttributeProgrammaticStreamSerialization) has completed and its memory writes
// are visible. A no-op for a grid launched without the attribute.
__device__ __forceinline__ void griddepcontrol_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// griddepcontrol.launch_dependents: lets the dependent grid start launching once every block
// of this grid has executed it (or exited); the dependent's blocks then sit in
// griddepcontrol.wait, so its launch latency hides behind this grid's tail. It signals no
// data: the dependent must still wait.
__device__ __forceinline__ void griddepcontrol_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

}  // namespace flashbuf::sm90
