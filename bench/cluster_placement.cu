// Measurement tool (not a test, not the benchmark of record): where the hardware places the
// blocks of a decode-shaped cluster launch, and what the cluster size costs a launch that streams
// the same bytes. The decode plan (core/split_kv.hpp) assumes a grid of at most one block per SM
// runs each block on an SM of its own; with two blocks' shared memory fitting an SM, a cluster
// larger than the free SMs of one GPC may instead put two of its blocks on one SM, and those two
// then share that SM's issue slots and load pipeline.
//
// Grid: `items` clusters of n blocks (n = 1 is a plain launch of the same blocks), 128 threads, the
// dynamic shared memory of decode's block (`smem_kb`, so that as many blocks fit an SM as there).
// For each n it prints
//   - the occupancy query's resident clusters (cudaOccupancyMaxActiveClusters);
//   - from 10 launches whose blocks record %smid: the fewest SMs used, the most blocks on one SM
//     and the most SMs that held two or more;
//   - µs per graph-replayed launch (bench/replay_timer.cuh) where each block streams
//     `total_mb` / (items x n) of a buffer (the split's keys and values), read once with 16-byte
//     loads, and where each block does nothing (the launch alone).
// The bytes streamed are the same for every n: only how many blocks share them, and in which
// clusters, changes. Each block's sum is written, so the loads cannot be dropped. These are plain
// loads, eight a thread in flight, slower per block than decode's ring: the streaming times rank
// launches of this kernel, not decode's; the placement is the hardware's either way.
//   nvcc -O3 -std=c++20 -arch=sm_90a -Iinclude -Isrc bench/cluster_placement.cu -o cpl && ./cpl [items] [smem_kb] [total_mb]
// Result: bench/results/ab/h100-stop74-cluster-placement.txt.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda/cluster_launch.cuh"
#include "replay_timer.cuh"

constexpr int kThreads = 128, kPlacements = 10;

__global__ void place_and_stream(const uint4* __restrict__ src, long long vecs_per_block, float* sums, int* smids) {
  extern __shared__ float reserved[];  // only to hold decode's share of the SM
  unsigned smid;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  const uint4* p = src + blockIdx.x * vecs_per_block;
  unsigned acc = 0;
#pragma unroll 8
  for (long long i = threadIdx.x; i < vecs_per_block; i += kThreads) {
    const uint4 v = __ldcs(p + i);
    acc ^= v.x + v.y + v.z + v.w;
  }
  if (threadIdx.x == 0) {
    reserved[0] = static_cast<float>(acc);
    smids[blockIdx.x] = static_cast<int>(smid);
  }
  acc = __reduce_xor_sync(0xffffffffu, acc);
  if ((threadIdx.x & 31) == 0) sums[blockIdx.x * 4 + threadIdx.x / 32] = static_cast<float>(acc);
}

int main(int argc, char** argv) {
  const int items = argc > 1 ? atoi(argv[1]) : 8;
  const int smem_kb = argc > 2 ? atoi(argv[2]) : 110;
  const int total_mb = argc > 3 ? atoi(argv[3]) : 16;
  const int smem = smem_kb * 1024;
  CK(cudaFuncSetAttribute(place_and_stream, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(place_and_stream, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  int sms = 0, per_sm = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, place_and_stream, kThreads, smem));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const long long total_vecs = static_cast<long long>(total_mb) * (1 << 20) / 16;
  uint4* src;
  float* sums;
  int* smids;
  CK(cudaMalloc(&src, total_vecs * 16));
  CK(cudaMemset(src, 0x5a, total_vecs * 16));
  CK(cudaMalloc(&sums, 16 * 4 * items * sizeof(float)));
  CK(cudaMalloc(&smids, 16 * items * sizeof(int)));
  printf("%s, %d SMs; items %d, %d KB shared a block (%d blocks an SM), %d MB streamed a launch\n", prop.name, sms,
         items, smem_kb, per_sm, total_mb);
  printf("cluster | resident clusters | SMs used  most/SM  SMs with 2+ | us streaming  us empty\n");
  for (int n : {1, 2, 4, 8, 12, 16}) {
    const int blocks = items * n;
    flashbuf::detail::ClusterLaunchConfig launch(dim3(blocks), dim3(kThreads), smem, n);
    cudaLaunchConfig_t& cfg = launch.config;
    int resident = 0;
    if (n > 1) CK(cudaOccupancyMaxActiveClusters(&resident, place_and_stream, &cfg));
    const long long per_block = total_vecs / blocks;
    int used = sms, most = 0, doubled = 0;  // over kPlacements launches: fewest SMs, most blocks on one
    for (int launch = 0; launch < kPlacements; ++launch) {
      CK(cudaLaunchKernelEx(&cfg, place_and_stream, static_cast<const uint4*>(src), per_block, sums, smids));
      CK(cudaDeviceSynchronize());
      std::vector<int> ids(blocks), count(sms, 0);
      CK(cudaMemcpy(ids.data(), smids, blocks * sizeof(int), cudaMemcpyDeviceToHost));
      for (int id : ids) ++count[id];
      used = std::min(used, static_cast<int>(std::count_if(count.begin(), count.end(), [](int c) { return c > 0; })));
      most = std::max(most, *std::max_element(count.begin(), count.end()));
      doubled = std::max(doubled, static_cast<int>(std::count_if(count.begin(), count.end(), [](int c) { return c > 1; })));
    }
    const float streaming = replayed_launch_us([&](cudaStream_t st) {
      cfg.stream = st;
      CK(cudaLaunchKernelEx(&cfg, place_and_stream, static_cast<const uint4*>(src), per_block, sums, smids));
    });
    const float empty = replayed_launch_us([&](cudaStream_t st) {
      cfg.stream = st;
      CK(cudaLaunchKernelEx(&cfg, place_and_stream, static_cast<const uint4*>(src), 0LL, sums, smids));
    });
    cfg.stream = nullptr;
    printf("%7d | %17d | %8d  %7d  %11d | %12.2f  %8.2f\n", n, resident, used, most, doubled, streaming, empty);
  }
  CK(cudaFree(src));
  CK(cudaFree(sums));
  CK(cudaFree(smids));
  return 0;
}
