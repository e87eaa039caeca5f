// The decode kernel's host side: one launcher per (Elem, D) with its occupancy queries and
// per-device readiness cache, instantiated in one generated unit each
// (cmake/instantiations.cmake writes generated/decode_<dtype>_<D>.cu from
// FLASHBUF_DECODE_INSTANTIATIONS; src/cuda/decode.cu sees them through FLASHBUF_DECODE_EXTERN).
// The kernel itself is device code in kernels/decode_kernel.cuh.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "api/problem.hpp"
#include "cuda/cluster_launch.cuh"
#include "cuda/device_cache.hpp"
#include "flashbuf/kernels/decode_config.cuh"
#include "flashbuf/kernels/decode_kernel.cuh"

namespace flashbuf::kernels::decode {

struct DecodeKernelInfo {
  int threads = 0;
  int smem_bytes = 0;       // dynamic shared memory per block
  int blocks_per_sm = 0;    // resident blocks per SM on the device; 0: the kernel cannot run there
  int block_n = 0;
  int max_cluster = 0;      // the most splits the cluster merge can take here (0: none, before sm_90)
  int sm_count = 0;         // the device's SMs
  bool deep_ring = false;   // the deep ring fits the device's shared memory (DecodeTile::kDeepSmemBytes)
  // With the deep ring: clusters of each size (2..16) resident at once (0: that size does not
  // schedule), so a cluster plan takes it only when all of its clusters fit in one wave.
  int deep_active_clusters[kMaxClusterSplits + 1] = {};
  int smem_optin_max = 0;   // the device's opt-in limit of shared memory per block (0: unknown)
  cudaError_t error = cudaSuccess;  // the runtime call that failed, when one did
  const char* failed_call = nullptr;
};

namespace launch_detail {

using ::flashbuf::detail::ClusterLaunchConfig;
using ::flashbuf::detail::PerDevice;

// Per-kernel, per-device readiness: the resident blocks per SM once the kernel's dynamic
// shared-memory limit has been raised on that device (0 = not prepared yet). A static member
// of a class template keyed on the kernel's template arguments, so every kernel has its own
// (a cache keyed on the kernel's *type* would be shared by all decode kernels, which have one
// signature: the first kernel prepared would mark every other one done).
template <class Elem, int D, int MT>
struct KernelState {
  static inline PerDevice<int> blocks_per_sm;
  // Stored before blocks_per_sm: max_cluster, sm_count, deep ring (0 / 1), its clusters.
  static inline PerDevice<int> max_cluster;
  static inline PerDevice<int> sm_count;
  static inline PerDevice<int> deep_ring;
  static inline PerDevice<int> deep_active_clusters[kMaxClusterSplits + 1];
};

// Clusters of `size` (>= 2) blocks of `kernel` resident at once on the current device (0:
// none, or the query failed).
inline int active_clusters(const void* kernel, int size, int threads, int smem_bytes) {
  const ClusterLaunchConfig launch(dim3(size), dim3(threads), smem_bytes, size);
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &launch.config) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return clusters;
}

// Cluster sizes above 8 need the non-portable opt-in; if it fails, 16 simply does not schedule.
inline void allow_nonportable_clusters(const void* kernel) {
  cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  cudaGetLastError();
}

// The largest cluster (16, else the portable 8) of `kernel` that the device can schedule at
// least one of, or 0: before sm_90, or when the kernel's code was compiled for an older
// target (an sm_80 build JIT-compiled on Hopper has no cluster merge in it).
inline int max_cluster_size(const void* kernel, int device, int threads, int smem_bytes) {
  int major = 0;
  cudaFuncAttributes attributes{};
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess || major < 9 ||
      cudaFuncGetAttributes(&attributes, kernel) != cudaSuccess || attributes.ptxVersion < 90) {
    cudaGetLastError();
    return 0;
  }
  allow_nonportable_clusters(kernel);
  for (int size : {kMaxClusterSplits, 8}) {
    if (active_clusters(kernel, size, threads, smem_bytes) > 0) return size;
  }
  return 0;
}

// Prepares decode_split_kv_kernel<Elem, D, MT> on `device` (which must be current) and reports
// its occupancy. Order matters: cudaFuncAttributeMaxDynamicSharedMemorySize must be raised
// before the occupancy query (which otherwise answers 0 blocks for more than 48 KB) and before
// the first launch. Successes are cached per device; failures are not (so each call reports
// its error) and leave no pending runtime error behind.
template <class Elem, int D, int MT>
DecodeKernelInfo prepare(int device) {
  using Tile = DecodeTile<D, MT>;
  auto* kernel = &decode_split_kv_kernel<Elem, D, MT>;
  DecodeKernelInfo info;
  info.threads = Tile::kThreads;
  info.smem_bytes = Tile::kSmemBytes;
  info.block_n = Tile::kBlockN;
  using State = KernelState<Elem, D, MT>;
  if (const int n = State::blocks_per_sm.load(device); n > 0) {
    info.blocks_per_sm = n;
    info.max_cluster = State::max_cluster.load(device);
    info.sm_count = State::sm_count.load(device);
    info.deep_ring = State::deep_ring.load(device) != 0;
    for (int c = 0; c <= kMaxClusterSplits; ++c) info.deep_active_clusters[c] = State::deep_active_clusters[c].load(device);
    return info;
  }
  auto fail = [&](cudaError_t err, const char* call) {
    cudaGetLastError();  // clear the (non-sticky) error so a later launch check does not see it
    info.error = err;
    info.failed_call = call;
    info.blocks_per_sm = 0;
    return info;
  };
  cudaError_t err = cudaDeviceGetAttribute(&info.smem_optin_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (err != cudaSuccess) return fail(err, "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
  if (info.smem_bytes > info.smem_optin_max) return info;  // blocks_per_sm = 0: too much shared memory
  err = cudaDeviceGetAttribute(&info.sm_count, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) return fail(err, "cudaDeviceGetAttribute(MultiProcessorCount)");
  // The deep ring where the device has the shared memory for it (H100/H200: yes; A100: no).
  info.deep_ring = Tile::kDeepStages > Tile::kStages && Tile::kDeepSmemBytes <= info.smem_optin_max;
  const int smem_limit = info.deep_ring ? Tile::kDeepSmemBytes : Tile::kSmemBytes;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_limit);
  if (err != cudaSuccess) return fail(err, "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
  // The lean variant takes the contiguous plans of this kernel (launch): the same shared memory
  // (the deep ring is the paged plans' only), blocks and clusters.
  auto* lean = &decode_split_kv_kernel<Elem, D, MT, true>;
  err = cudaFuncSetAttribute(lean, cudaFuncAttributeMaxDynamicSharedMemorySize, Tile::kSmemBytes);
  if (err != cudaSuccess) return fail(err, "cudaFuncSetAttribute(MaxDynamicSharedMemorySize), lean kernel");
  int blocks = 0;
  err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, Tile::kThreads, Tile::kSmemBytes);
  if (err != cudaSuccess) return fail(err, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  info.blocks_per_sm = blocks;
  if (blocks > 0) {
    const void* k = reinterpret_cast<const void*>(kernel);
    info.max_cluster = max_cluster_size(k, device, Tile::kThreads, Tile::kSmemBytes);
    if (info.max_cluster > 8) allow_nonportable_clusters(reinterpret_cast<const void*>(lean));
    for (int c = 2; info.deep_ring && c <= info.max_cluster; ++c) {
      info.deep_active_clusters[c] = active_clusters(k, c, Tile::kThreads, Tile::kDeepSmemBytes);
    }
  }
  if (blocks > 0) {  // (a device past the cached ones stores nothing)
    State::max_cluster.store(device, info.max_cluster);
    State::sm_count.store(device, info.sm_count);
    State::deep_ring.store(device, info.deep_ring ? 1 : 0);
    for (int c = 0; c <= kMaxClusterSplits; ++c) State::deep_active_clusters[c].store(device, info.deep_active_clusters[c]);
    State::blocks_per_sm.store(device, blocks);  // last: publishes the fields above
  }
  return info;
}

template <class Elem, int D, int MT>
cudaError_t launch(int device, const DecodeParams& params, dim3 grid, cudaStream_t stream) {
  using Tile = DecodeTile<D, MT>;
  // Contiguous caches without a left window take the lean kernel (decode_kernel.cuh).
  const bool lean = params.page_table == nullptr && params.window_left < 0;
  auto* kernel = lean ? &decode_split_kv_kernel<Elem, D, MT, true> : &decode_split_kv_kernel<Elem, D, MT>;
  // Normally prepared by the plan already (one atomic load here); a device the plan did not
  // prepare (or one past the cache) is prepared now.
  const bool ready = KernelState<Elem, D, MT>::blocks_per_sm.load(device) > 0;
  if (!ready) {
    const DecodeKernelInfo info = prepare<Elem, D, MT>(device);
    if (info.blocks_per_sm < 1) return info.error != cudaSuccess ? info.error : cudaErrorInvalidConfiguration;
  }
  // The splits of one item merged in the cluster: one cluster.
  const int cluster = params.num_splits > 1 && params.merge == SplitMerge::cluster ? params.num_splits : 1;
  const ClusterLaunchConfig launch(grid, dim3(Tile::kThreads), params.deep_ring ? Tile::kDeepSmemBytes : Tile::kSmemBytes,
                                   cluster, stream);
  return cudaLaunchKernelEx(&launch.config, kernel, params);  // reports this launch's own error
}

}  // namespace launch_detail

// Kernel facts for the MTiles of a plan on `device` (the current device): prepares the kernel
// (shared-memory opt-in, then the occupancy query). blocks_per_sm = 0 when it cannot run;
// `error` / `failed_call` or smem_bytes > smem_optin_max say why.
template <class Elem, int D>
DecodeKernelInfo decode_kernel_info(int mtiles, int device) {
  switch (mtiles) {
    case 1: return launch_detail::prepare<Elem, D, 1>(device);
    case 2: return launch_detail::prepare<Elem, D, 2>(device);
    case 4: return launch_detail::prepare<Elem, D, 4>(device);
    case 8: return launch_detail::prepare<Elem, D, 8>(device);
    default: {
      DecodeKernelInfo info;
      info.error = cudaErrorInvalidValue;
      info.failed_call = "decode_kernel_info (MTiles must be 1, 2, 4 or 8)";
      return info;
    }
  }
}

// Launch on `device` (the current device): grid (num_splits, heads_kv * row_chunks, batch).
template <class Elem, int D>
cudaError_t launch_decode(int mtiles, int device, const DecodeParams& params, dim3 grid, cudaStream_t stream) {
  switch (mtiles) {
    case 1: return launch_detail::launch<Elem, D, 1>(device, params, grid, stream);
    case 2: return launch_detail::launch<Elem, D, 2>(device, params, grid, stream);
    case 4: return launch_detail::launch<Elem, D, 4>(device, params, grid, stream);
    case 8: return launch_detail::launch<Elem, D, 8>(device, params, grid, stream);
    default: return cudaErrorInvalidValue;
  }
}

// The instantiation list's dtype names (bf16, fp16) as element types.
#define FLASHBUF_DECODE_ELEM_bf16 __nv_bfloat16
#define FLASHBUF_DECODE_ELEM_fp16 __half
#define FLASHBUF_DECODE_ELEM(DT) FLASHBUF_DECODE_ELEM_##DT

// One generated unit per (dtype, D) compiles the kernels (FLASHBUF_DECODE_INSTANTIATE);
// every other unit sees them extern. DT is a dtype name of the list: bf16 or fp16.
#define FLASHBUF_DECODE_EXTERN(DT, D)                                                                 \
  extern template DecodeKernelInfo decode_kernel_info<FLASHBUF_DECODE_ELEM(DT), D>(int, int);           \
  extern template cudaError_t launch_decode<FLASHBUF_DECODE_ELEM(DT), D>(int, int, const DecodeParams&, \
                                                                         dim3, cudaStream_t);
#define FLASHBUF_DECODE_INSTANTIATE(DT, D)                                                            \
  template DecodeKernelInfo decode_kernel_info<FLASHBUF_DECODE_ELEM(DT), D>(int, int);                  \
  template cudaError_t launch_decode<FLASHBUF_DECODE_ELEM(DT), D>(int, int, const DecodeParams&, dim3,  \
                                                                  cudaStream_t);

}  // namespace flashbuf::kernels::decode

namespace flashbuf::detail {

// The decode kernel's parameters for a plan and its validated problem (src/cuda/decode.cu):
// what cuda_decode launches, but for the workspace's part pointers and the ring's depth, which
// the launch fills in from its workspace and device. bench/trace_decode.cu builds its launches
// from it too. Throws ArgumentError for a paged cache's page or row stride of 4 GiB or more.
kernels::decode::DecodeParams make_decode_params(const DecodePlan& plan, const AttentionProblem& p);

}  // namespace flashbuf::detail

