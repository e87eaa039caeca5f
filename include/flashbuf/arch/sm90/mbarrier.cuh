// arch/sm90: mbarrier — the shared-memory barrier objects that a producer and its consumers
// hand pipeline stages over with (sm90: try_wait with a phase parity; cp.async completion
// arriving on a barrier). One PTX family per file; wrappers are named after the instruction.
//
// A barrier counts arrivals; when the expected count is reached its phase flips (0, 1, 0, ...)
// and the count re-arms. A waiter names the parity of the phase it waits to see completed:
// consumers of stage s wait with parity (round & 1); the producer waits on the "empty" barrier
// with parity (round & 1) ^ 1, which a fresh barrier (phase 0 running) satisfies at once.
#pragma once

#include <cstdint>

#include "flashbuf/arch/sm80/cp_async.cuh"

namespace flashbuf::sm90 {

__device__ __forceinline__ void mbarrier_init(std::uint64_t* bar, int expected_arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(sm80::smem_u32(bar)), "r"(expected_arrivals)
               : "memory");
}

// Makes this thread's mbarrier.init visible to the other proxies (the TMA unit completes
// transactions on the barriers) and to the cluster's other blocks (their st.async does);
// issued by the initialising thread before the block or cluster barrier that publishes it.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Arrives on `bar` (one of its expected arrivals) and adds `bytes` to the transaction count
// the current phase waits for (bulk copies and st.async complete it).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(std::uint64_t* bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(sm80::smem_u32(bar)), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(sm80::smem_u32(bar)) : "memory");
}

// Arrives on `bar` once every cp.async this thread issued so far has landed. `.noinc`: the
// arrival is one of the barrier's expected arrivals (the init count includes the copiers).
__device__ __forceinline__ void cp_async_mbarrier_arrive_noinc(std::uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(sm80::smem_u32(bar)) : "memory");
}

// Blocks until the phase of parity `parity` has completed (acquire: the data the arrivals
// published is visible to this thread afterwards).
__device__ __forceinline__ void mbarrier_wait_parity(std::uint64_t* bar, int parity) {
  asm volatile(
      "{\n"  // labels are local to the braces, so the wrapper can be inlined many times
      ".reg .pred done;\n"
      "wait_loop:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_loop;\n"
      "}\n" ::"r"(sm80::smem_u32(bar)),
      "r"(parity)
      : "memory");
}

// As mbarrier_wait_parity, acquiring at cluster scope: for a phase whose transaction bytes peer
// blocks of the cluster wrote (st.async), so that their data is visible here afterwards.
__device__ __forceinline__ void mbarrier_wait_parity_acquire_cluster(std::uint64_t* bar, int parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_loop:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_loop;\n"
      "}\n" ::"r"(sm80::smem_u32(bar)),
      "r"(parity)
      : "memory");
}

}  // namespace flashbuf::sm90
