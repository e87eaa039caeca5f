// arch/sm90: warpgroup MMA plumbing — the shared-memory matrix descriptor and the fence /
// commit / wait that order wgmma with ordinary register and shared-memory accesses. The MMA
// instructions themselves are in wgmma_ops.cuh (generated). Needs sm_90a.
#pragma once

#include <cstdint>

#include "flashbuf/arch/sm90/target.cuh"
#include "flashbuf/arch/sm90/wgmma_ops.cuh"

namespace flashbuf::sm90 {

// The 64-bit shared-memory matrix descriptor of wgmma (PTX ISA, "Matrix Descriptor Format"):
//   bits  0..13  start address >> 4
//   bits 16..29  leading-dimension byte offset >> 4  (LBO)
//   bits 32..45  stride-dimension byte offset >> 4   (SBO)
//   bits 62..63  swizzle mode: 1 = 128-byte swizzle
// For the 128-byte swizzle every 8-row x 128-byte atom must start 1024-byte aligned; moving
// along K inside an atom only moves the start address (by 32 bytes per k16 step of 16-bit data).
enum class SmemSwizzle : std::uint64_t { none = 0, b128 = 1, b64 = 2, b32 = 3 };

__device__ __forceinline__ std::uint64_t make_smem_desc(std::uint32_t smem_addr, std::uint32_t lbo_bytes,
                                                         std::uint32_t sbo_bytes, SmemSwizzle swizzle) {
  std::uint64_t desc = 0;
  desc |= static_cast<std::uint64_t>((smem_addr >> 4) & 0x3FFF);
  desc |= static_cast<std::uint64_t>((lbo_bytes >> 4) & 0x3FFF) << 16;
  desc |= static_cast<std::uint64_t>((sbo_bytes >> 4) & 0x3FFF) << 32;
  desc |= static_cast<std::uint64_t>(swizzle) << 62;
  return desc;
}

// The descriptor of the matrix `bytes` further on in shared memory: only the start-address
// field moves, and it cannot carry into the next (shared memory ends below 2^18 bytes, so
// addr >> 4 stays below 2^14): one 32-bit add on the low word, where building each k-step's
// descriptor anew (shift, mask, or) took ~5 uniform instructions a wgmma, a fifth of the
// Hopper prefill loop's issue slots at D 128.
__device__ __forceinline__ std::uint64_t smem_desc_advance(std::uint64_t desc, std::uint32_t bytes) {
  const std::uint32_t lo = static_cast<std::uint32_t>(desc) + (bytes >> 4);
  return (desc & 0xFFFFFFFF00000000ull) | lo;
}
// The same value by one 64-bit add (the start-address field cannot carry, as above): ptxas
// then advances the descriptor's register pair with one UIADD3.64 and does not write its
// constant high word again before each wgmma, two uniform instructions a k-step fewer. Not
// the default: where every operand's k-steps take it, the paged D 256 kernel spills.
__device__ __forceinline__ std::uint64_t smem_desc_advance_wide(std::uint64_t desc, std::uint32_t bytes) {
  return desc + (bytes >> 4);
}

// Orders this warpgroup's register writes (accumulators, A fragments) before the next wgmma.
__device__ __forceinline__ void wgmma_fence() {
#ifndef FLASHBUF_NO_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit_group() {
#ifndef FLASHBUF_NO_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most `Pending` committed wgmma groups of this warpgroup are in flight.
template <int Pending>
__device__ __forceinline__ void wgmma_wait_group() {
#ifndef FLASHBUF_NO_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
#endif
}

// Orders generic-proxy shared-memory writes (st.shared, cp.async) before the async proxy's
// reads (wgmma operands, TMA): issued after the barrier (or mbarrier wait) that made the
// writes visible to this thread, before its wgmma.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Keeps the compiler from moving accumulator reads/writes across an in-flight wgmma.
template <int N>
__device__ __forceinline__ void fence_registers(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// The same for register-A fragments, which wgmma reads until the group completes.
template <int N>
__device__ __forceinline__ void fence_registers(std::uint32_t (&a)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(a[i][j])::"memory");
}

// Ends the scheduler's basic block here with a branch it cannot remove, for a condition the
// caller knows never holds (`never`): ptxas may move a wgmma wait to the top of the block it
// sits in, so work meant to run under an in-flight product goes in an earlier block than the
// wait for it. The branch's body is a one-cycle sleep, so that it stays a branch (a trap
// there made ptxas stop tracking the products in flight and wait after every wgmma).
__device__ __forceinline__ void end_schedule_block(bool never) {
  if (never) asm volatile("nanosleep.u32 1;\n" ::: "memory");
}

}  // namespace flashbuf::sm90
