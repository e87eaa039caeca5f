// arch/sm90: thread-block clusters — the cluster barrier, and reads of and asynchronous stores
// into a peer block's shared memory (distributed shared memory). One PTX family per file;
// wrappers are named after the instruction they emit. Compiled for sm_90+ only (callers guard with __CUDA_ARCH__ >= 900).
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

// barrier.cluster.arrive.relaxed: no memory ordering, no fence before the arrival. For a
// barrier that only keeps every block's shared memory alive until its peers are done reading
// it (a read whose value has been used is complete), so a block's global stores do not have
// to drain before its peers may exit; or one that publishes an mbarrier's initialisation,
// which fence_mbarrier_init has ordered already.
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

// st.async: stores into a peer block's shared memory (`addr`, a shared::cluster address from
// mapa) that complete their bytes on the peer's mbarrier (`remote_bar`, mapped the same way):
// the peer learns that they have landed by waiting on its own barrier, whose expected
// transaction bytes count them (mbarrier_wait_parity_acquire_cluster).
__device__ __forceinline__ void st_async_v4_f32(std::uint32_t addr, float4 v, std::uint32_t remote_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(addr),
               "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(remote_bar)
               : "memory");
}

__device__ __forceinline__ void st_async_f32(std::uint32_t addr, float v, std::uint32_t remote_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];\n" ::"r"(addr), "f"(v),
               "r"(remote_bar)
               : "memory");
}

#endif

}  // namespace flashbuf::sm90
