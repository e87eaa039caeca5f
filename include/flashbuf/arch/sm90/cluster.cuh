// arch/sm90: thread-block clusters — the cluster barrier and reads of a peer block's shared
// memory (distributed shared memory). One PTX family per file; wrappers are named after the
// instruction they emit. Compiled for sm_90+ only (callers guard with __CUDA_ARCH__ >= 900).
#pragma once

#include <cstdint>

#include "flashbuf/arch/sm80/cp_async.cuh"

namespace flashbuf::sm90 {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

// barrier.cluster.arrive (release: this thread's earlier shared-memory writes are visible to
// the cluster's threads once they have waited). Every thread of the block arrives.
__device__ __forceinline__ void barrier_cluster_arrive_release() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}

// barrier.cluster.arrive.relaxed: no memory ordering, no fence before the arrival. For the
// barrier that only keeps every block's shared memory alive until its peers are done reading
// it (a read whose value has been used is complete), so a block's global stores do not have
// to drain before its peers may exit.
__device__ __forceinline__ void barrier_cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}

// barrier.cluster.wait (acquire): returns once every thread of the cluster has arrived.
__device__ __forceinline__ void barrier_cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// mapa: the shared::cluster address of `smem` (this block's shared memory) in block `rank`
// of the cluster.
__device__ __forceinline__ std::uint32_t mapa_shared_cluster(const void* smem, int rank) {
  std::uint32_t out;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(sm80::smem_u32(smem)), "r"(rank));
  return out;
}

__device__ __forceinline__ float ld_shared_cluster_f32(std::uint32_t addr) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(addr) : "memory");
  return v;
}

__device__ __forceinline__ float4 ld_shared_cluster_v4_f32(std::uint32_t addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

#endif

}  // namespace flashbuf::sm90
