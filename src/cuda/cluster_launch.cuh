// The runtime's launch configuration for blocks in thread-block clusters along x, for
// cudaLaunchKernelEx and the cluster occupancy query (decode_launch.cuh, and the single-file
// measurement tools bench/cluster_merge_rate.cu and bench/cluster_placement.cu). The config
// points at the cluster attribute it holds, so the object neither copies nor moves.
#pragma once

#include <cuda_runtime.h>

namespace flashbuf::detail {

struct ClusterLaunchConfig {
  cudaLaunchConfig_t config{};
  cudaLaunchAttribute attribute[1]{};

  // `cluster` blocks a cluster; 1 (or less): a plain launch, no cluster attribute.
  ClusterLaunchConfig(dim3 grid, dim3 block, int smem_bytes, int cluster, cudaStream_t stream = nullptr) {
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = static_cast<size_t>(smem_bytes);
    config.stream = stream;
    attribute[0].id = cudaLaunchAttributeClusterDimension;
    attribute[0].val.clusterDim.x = cluster > 1 ? static_cast<unsigned>(cluster) : 1u;
    attribute[0].val.clusterDim.y = 1;
    attribute[0].val.clusterDim.z = 1;
    config.attrs = attribute;
    config.numAttrs = cluster > 1 ? 1 : 0;
  }
  ClusterLaunchConfig(const ClusterLaunchConfig&) = delete;
  ClusterLaunchConfig& operator=(const ClusterLaunchConfig&) = delete;
};

}  // namespace flashbuf::detail
