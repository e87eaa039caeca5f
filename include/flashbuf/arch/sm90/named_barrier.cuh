// arch/sm90: bar.sync / bar.arrive on named barriers — synchronise a subset of a block's warps
// (the consumer warpgroups of a warp-specialised kernel, without the producer), or let one
// warpgroup signal another without waiting itself (ping-pong scheduling). Barrier 0 is
// __syncthreads(); kernels name the others in an enum. `threads` counts every participant,
// those that sync and those that only arrive, and is a multiple of 32.
#pragma once

namespace flashbuf::sm90 {

__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace flashbuf::sm90
