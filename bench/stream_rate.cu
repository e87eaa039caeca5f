// Measurement tool (not a test, not the benchmark of record): the rate at which blocks of 128
// threads stream K/V-shaped tiles (64 rows of 256 B, row stride 2 KB: one head of a
// (B, S, 8, 128) bf16 cache) into a shared ring with no compute, as the decode kernel's
// latency-bound grids do (64 or 128 blocks, 1-16 tiles each):
//   lds:  cp.async 16 B per thread (LDGSTS), S stages, wait_group S-2 + __syncthreads (the
//         decode kernel's copies, swizzled);
//   bulk: cp.async.bulk 256 B per row (one row per thread), an mbarrier per stage, rows
//         padded to 272 B.
// Each launch replays 20 times in a CUDA graph (median of 7); the 0-tile rows are the fixed
// cost of a replayed launch. The source is the same every launch, so small grids read L2.
//   nvcc -O3 -std=c++20 -arch=sm_90a -Iinclude bench/stream_rate.cu -o stream_rate && ./stream_rate
// Result of record: bench/results/h200-stream-cpasync-bulk-20261130.txt.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "flashbuf/arch/sm80/cp_async.cuh"
#include "flashbuf/arch/sm90/mbarrier.cuh"
#include "flashbuf/arch/sm90/tma.cuh"
#include "replay_timer.cuh"

using flashbuf::sm80::smem_u32;
namespace sm80 = flashbuf::sm80;
namespace sm90 = flashbuf::sm90;
constexpr int kRows = 64, kRowBytes = 256, kTile = kRows * kRowBytes;  // one K tile (V alike): 16 KB
template <int S>
__global__ void __launch_bounds__(128)
    lds_stream(const char* __restrict__ src, long row_stride, int tiles, float* sink) {
  extern __shared__ __align__(128) char smem[];
  const int tid = threadIdx.x;
  const char* base = src + (long)blockIdx.x * tiles * kRows * row_stride;
  auto load = [&](int t, int s) {
    // 2 tiles (K and V) per stage = 32 KB: each thread 16 chunks of 16 B
    for (int kv = 0; kv < 2; ++kv)
      for (int i = 0; i < 8; ++i) {
        int r = i * 8 + tid / 16, c = tid % 16;
        const char* g = base + (long)kv * 1024 + ((long)t * kRows + r) * row_stride + c * 16;
        sm80::cp_async_cg_16(smem + s * 2 * kTile + kv * kTile + r * kRowBytes + ((c ^ (r & 7)) << 4), g, true);
      }
  };
  for (int s = 0; s < S - 1; ++s) {
    if (s < tiles) load(s, s);
    sm80::cp_async_commit_group();
  }
  float acc = 0.f;
  for (int t = 0; t < tiles; ++t) {
    sm80::cp_async_wait_group<S - 2>();
    __syncthreads();
    int nx = t + S - 1;
    if (nx < tiles) load(nx, nx % S);
    sm80::cp_async_commit_group();
    acc += *(const float*)(smem + (t % S) * 2 * kTile + tid * 4);
  }
  if (acc == 12345.f) *sink = acc;
}
template <int S>
__global__ void __launch_bounds__(128)
    bulk_stream(const char* __restrict__ src, long row_stride, int tiles, float* sink) {
  extern __shared__ __align__(128) char smem[];
  __shared__ __align__(8) std::uint64_t bar[S];
  const int tid = threadIdx.x;
  const char* base = src + (long)blockIdx.x * tiles * kRows * row_stride;
  if (tid == 0)
    for (int s = 0; s < S; ++s) sm90::mbarrier_init(&bar[s], 1);
  sm90::fence_mbarrier_init();
  __syncthreads();
  constexpr int kPad = 272;  // padded rows: conflict-free ldmatrix without a swizzle
  auto load = [&](int t, int s) {
    if (tid == 0) sm90::mbarrier_arrive_expect_tx(&bar[s], 2 * kTile);
    __syncwarp();
    // 128 rows (64 K + 64 V) per stage: one 256 B bulk copy per thread
    int kv = tid / 64, r = tid % 64;
    const char* g = base + (long)kv * 1024 + ((long)t * kRows + r) * row_stride;
    unsigned d = smem_u32(smem + s * 2 * kRows * kPad + kv * kRows * kPad + r * kPad);
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 256, [%2];\n" ::"r"(d),
                 "l"(g), "r"(smem_u32(&bar[s]))
                 : "memory");
  };
  for (int s = 0; s < S - 1; ++s)
    if (s < tiles) load(s, s);
  float acc = 0.f;
  for (int t = 0; t < tiles; ++t) {
    const int s = t % S;
    const unsigned phase = (t / S) & 1;
    sm90::mbarrier_wait_parity(&bar[s], phase);
    __syncthreads();  // everyone done with tile t-1's stage
    int nx = t + S - 1;
    if (nx < tiles) load(nx, nx % S);
    acc += *(const float*)(smem + s * 2 * kRows * kPad + tid * 4);
  }
  if (acc == 12345.f) *sink = acc;
}
template <class K>
float time_it(K kernel, int blocks, int smem, const char* src, long stride, int tiles, float* sink) {
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  return replayed_launch_us([&](cudaStream_t st) { kernel<<<blocks, 128, smem, st>>>(src, stride, tiles, sink); });
}
int main() {
  const long stride = 2048;  // 8 heads x 128 x 2 B: one head's rows, like a (B, S, Hkv, D) cache
  const int max_tiles = 64;
  size_t bytes = (size_t)132 * max_tiles * kRows * stride + 4096;
  char* src;
  CK(cudaMalloc(&src, bytes));
  CK(cudaMemset(src, 1, bytes));
  float* sink;
  CK(cudaMalloc(&sink, 4));
  printf("blocks tiles | lds S3  lds S5  bulk S3  bulk S5   (us; GB/s per block)\n");
  for (int blocks : {64, 128})
    for (int tiles : {0, 1, 4, 8, 16}) {
      const double mb = 2.0 * kTile * tiles;  // bytes per block
      float t0 = time_it(lds_stream<3>, blocks, 3 * 2 * kTile, src, stride, tiles, sink);
      float t1 = time_it(lds_stream<5>, blocks, 5 * 2 * kTile, src, stride, tiles, sink);
      float t2 = time_it(bulk_stream<3>, blocks, 3 * 2 * kRows * 272, src, stride, tiles, sink);
      float t3 = time_it(bulk_stream<5>, blocks, 5 * 2 * kRows * 272, src, stride, tiles, sink);
      printf("%4d %4d | %6.2f %6.2f %6.2f %6.2f  | %5.0f %5.0f %5.0f %5.0f\n", blocks, tiles, t0, t1, t2, t3,
             mb / t0 / 1e3, mb / t1 / 1e3, mb / t2 / 1e3, mb / t3 / 1e3);
    }
  // an empty launch for the fixed cost
  return 0;
}
