// The device clocks of the per-block timeline tools (bench/trace_prefill.cu and
// bench/trace_decode.cu). Each read takes `after`, a value it waits for, so that the compiler
// cannot move the read above the work that value comes from.
#pragma once

// This block's index in its grid, x fastest: where its record goes.
__device__ __forceinline__ unsigned linear_block() {
  return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}
// %globaltimer: nanoseconds, one clock for the whole GPU.
__device__ __forceinline__ unsigned long long global_ns(int after = 0) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) : "r"(after));
  return t;
}
// %clock64: the SM's cycles, one counter for the block's warps.
__device__ __forceinline__ unsigned long long sm_cycles(int after = 0) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) : "r"(after));
  return t;
}
__device__ __forceinline__ unsigned long long sm_cycles(float after) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) : "f"(after));
  return t;
}
__device__ __forceinline__ unsigned sm_id() {
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  return sm;
}
