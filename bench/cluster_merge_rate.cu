// Measurement tool (not a test, not the benchmark of record): what decode's merge of the splits
// inside a thread-block cluster costs per graph-replayed launch, by its mechanism alone. Grid
// and block as the latency-bound decode rows (B 1, 32/8 heads, D 128: 8 clusters of 8 blocks of
// 128 threads; each block holds the normalised O of 4 rows x 128 channels and their LSEs, as
// after its warps' merge). Every block first spins `work` cycles (its key tiles), then:
//   none: writes its own part to global memory (no merge: the floor);
//   pull: decode_epilogue.cuh's merge_cluster: parts into its own shared
//         memory, cluster barrier (arrive.release / wait), one lane per (piece, part) reads its
//         part from the peer's shared memory, the lane group reduces with shuffles and stores,
//         then a relaxed cluster barrier keeps shared memory alive for the peers;
//   push: every block's mbarrier is initialised at the start, with one relaxed cluster arrive
//         there and its wait before the epilogue; each block writes its parts into the owner's
//         shared memory with st.async (complete_tx on the owner's mbarrier); the owner waits on
//         its own mbarrier, reads locally, reduces and stores. No cluster barrier at the end:
//         no block reads another's shared memory, and each owner lives until its bytes landed;
//   push+bar: push, then the relaxed cluster barrier at the end all the same;
//   barriers: none's stores between pull's two cluster barriers (what the barriers cost);
//   copy:   push, but the owner stores part 0 as it landed (the transfer without the reduce);
//   serial: push with one owner thread a piece over its parts in sequence (no shuffles).
// Every merged output (pull, push, push+bar, serial) is checked on the host. Each launch
// replays 20 times in a CUDA graph (median of 7). The library now pushes at one row tile
// (decode_epilogue.cuh's merge_pushed), with another slot layout than this file's push (there
// piece i goes to block i % n; here each (piece, part) lane goes to the block that pulled it).
//   nvcc -O3 -std=c++20 -arch=sm_90a -Iinclude -Isrc bench/cluster_merge_rate.cu -o cmr && ./cmr
// Result: bench/results/ab/h100-stop73-cluster-merge-rate.txt.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda/cluster_launch.cuh"
#include "flashbuf/arch/sm80/cp_async.cuh"
#include "flashbuf/arch/sm90/cluster.cuh"
#include "flashbuf/arch/sm90/mbarrier.cuh"
#include "flashbuf/buffers/part_merge.cuh"
#include "replay_timer.cuh"

namespace sm80 = flashbuf::sm80;
namespace sm90 = flashbuf::sm90;
constexpr int kThreads = 128, kRows = 4, kD = 128, kChunks = kD / 8, kPieces = kRows * kChunks;
constexpr int kOStride = kD + 8;

enum Mode { kNone, kPull, kPush, kPushBar, kBarriers, kPushCopy, kPushSerial };

// A block's part: deterministic values the host recomputes. lse2 per (row, split).
__host__ __device__ inline float part_lse(int item, int split, int r) { return 0.25f * ((item * 7 + split * 3 + r) % 11) - 1.0f; }
__host__ __device__ inline float part_o(int item, int split, int r, int ch) {
  return 0.001f * ((item * 13 + split * 5 + r * 3 + ch) % 97) - 0.05f;
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900  // the cluster wrappers exist from sm_90 on
__device__ __forceinline__ void spin(int cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

// One (piece, part) lane's values merged over its group of g lanes (the library's
// merge_lane_group, as decode's cluster merges run it); the first lane stores.
__device__ __forceinline__ void reduce_store(float l, float4 lo, float4 hi, int g, bool stores, float* dst) {
  float acc[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  flashbuf::merge_lane_group(g, l, acc);
  if (stores) {
    float4* d = reinterpret_cast<float4*>(dst);
    d[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    d[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
  }
}
#endif

template <Mode M>
__global__ void __launch_bounds__(kThreads) merge_kernel(float* out, int n, int work) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) float smem[];
  __shared__ __align__(8) std::uint64_t land_bar;
  const int tid = threadIdx.x, lane = tid & 31;
  const int split = blockIdx.x % n;
  const int item = blockIdx.x / n;
  const int g = 1 << (32 - __clz(n - 1));
  const int items = kPieces * g;
  float* const so = smem;                          // this block's part: kRows x kOStride
  float* const sl = smem + kRows * kOStride;       // its LSEs
  float* const land_o = sl + 32;                   // push: landing slots, 8 floats each
  float* const land_l = land_o + 4 * kThreads * 8; // and their LSEs
  const int passes = (items + n * kThreads - 1) / (n * kThreads);

  if constexpr (M == kPush || M == kPushBar || M == kPushCopy || M == kPushSerial) {
    // Each owner thread expects the bytes of its own slots: one (piece, part) per pass.
    if (tid == 0) sm90::mbarrier_init(&land_bar, kThreads);
    sm90::fence_mbarrier_init();
    __syncthreads();
    std::uint32_t bytes = 0;
    if constexpr (M == kPushSerial) {
      for (int pc = split + tid * n; pc < kPieces; pc += kThreads * n) bytes += 36 * n;
    } else {
      for (int k = 0; k < passes; ++k) {
        const int idx = (k * n + split) * kThreads + tid;
        if (idx < items && (idx & (g - 1)) < n) bytes += 36;
      }
    }
    sm90::mbarrier_arrive_expect_tx(&land_bar, bytes);
    sm90::barrier_cluster_arrive_relaxed();
  }
  spin(work);

  if constexpr (M == kBarriers) {
    sm90::barrier_cluster_arrive_release();
    sm90::barrier_cluster_wait();
  }
  if constexpr (M == kNone || M == kBarriers) {
    for (int p = tid; p < kPieces; p += kThreads) {
      const int r = p / kChunks, c = p % kChunks;
      float4* d = reinterpret_cast<float4*>(out + ((item * n + split) * kRows + r) * kD + c * 8);
      d[0] = make_float4(part_o(item, split, r, c * 8), part_o(item, split, r, c * 8 + 1), part_o(item, split, r, c * 8 + 2),
                         part_o(item, split, r, c * 8 + 3));
      d[1] = make_float4(part_o(item, split, r, c * 8 + 4), part_o(item, split, r, c * 8 + 5), part_o(item, split, r, c * 8 + 6),
                         part_o(item, split, r, c * 8 + 7));
    }
    if constexpr (M == kBarriers) {
      sm90::barrier_cluster_arrive_relaxed();
      sm90::barrier_cluster_wait();
    }
    return;
  }
  if constexpr (M == kPull) {
    for (int p = tid; p < kPieces; p += kThreads) {
      const int r = p / kChunks, c = p % kChunks;
      float4* d = reinterpret_cast<float4*>(so + r * kOStride + c * 8);
      d[0] = make_float4(part_o(item, split, r, c * 8), part_o(item, split, r, c * 8 + 1), part_o(item, split, r, c * 8 + 2),
                         part_o(item, split, r, c * 8 + 3));
      d[1] = make_float4(part_o(item, split, r, c * 8 + 4), part_o(item, split, r, c * 8 + 5), part_o(item, split, r, c * 8 + 6),
                         part_o(item, split, r, c * 8 + 7));
      if (c == 0) sl[r] = part_lse(item, split, r);
    }
    sm90::barrier_cluster_arrive_release();
    sm90::barrier_cluster_wait();
    for (int idx = split * kThreads + tid; idx - lane < items; idx += n * kThreads) {
      const int part = idx & (g - 1), piece = idx / g, r = piece / kChunks, c = piece % kChunks;
      float l = -INFINITY;
      float4 lo = make_float4(0, 0, 0, 0), hi = lo;
      if (idx < items && part < n) {
        l = sm90::ld_shared_cluster_f32(sm90::mapa_shared_cluster(sl + r, part));
        const std::uint32_t a = sm90::mapa_shared_cluster(so + r * kOStride + c * 8, part);
        lo = sm90::ld_shared_cluster_v4_f32(a);
        hi = sm90::ld_shared_cluster_v4_f32(a + 16);
      }
      reduce_store(l, lo, hi, g, idx < items && part == 0, out + (item * kRows + r) * kD + c * 8);
    }
    sm90::barrier_cluster_arrive_relaxed();
    sm90::barrier_cluster_wait();
    return;
  }
  if constexpr (M == kPush || M == kPushBar || M == kPushCopy || M == kPushSerial) {
    sm90::barrier_cluster_wait();  // every owner's mbarrier is initialised
    for (int p = tid; p < kPieces; p += kThreads) {
      const int r = p / kChunks, c = p % kChunks;
      const int idx = p * g + split;  // this part's (piece, part) item
      const int owner = M == kPushSerial ? p % n : (idx / kThreads) % n;
      const int slot = M == kPushSerial ? (p / n) * n + split : (idx / (kThreads * n)) * kThreads + idx % kThreads;
      const std::uint32_t bar = sm90::mapa_shared_cluster(&land_bar, owner);
      const std::uint32_t a = sm90::mapa_shared_cluster(land_o + slot * 8, owner);
      sm90::st_async_v4_f32(a, make_float4(part_o(item, split, r, c * 8), part_o(item, split, r, c * 8 + 1), part_o(item, split, r, c * 8 + 2),
                                 part_o(item, split, r, c * 8 + 3)),
                  bar);
      sm90::st_async_v4_f32(a + 16, make_float4(part_o(item, split, r, c * 8 + 4), part_o(item, split, r, c * 8 + 5),
                                      part_o(item, split, r, c * 8 + 6), part_o(item, split, r, c * 8 + 7)),
                  bar);
      sm90::st_async_f32(sm90::mapa_shared_cluster(land_l + slot, owner), part_lse(item, split, r), bar);
    }
    sm90::mbarrier_wait_parity_acquire_cluster(&land_bar, 0);
    if constexpr (M == kPushSerial) {
      // One thread a piece: its n parts from this block's own shared memory, in sequence.
      for (int pc = split + tid * n; pc < kPieces; pc += kThreads * n) {
        const int r = pc / kChunks, c = pc % kChunks, base = (pc / n) * n;
        float mx = -INFINITY;
        for (int j = 0; j < n; ++j) mx = fmaxf(mx, land_l[base + j]);
        float acc[8] = {}, sum = 0.f;
        for (int j = 0; j < n; ++j) {
          const float f = exp2f(land_l[base + j] - mx);
          const float4 lo = reinterpret_cast<const float4*>(land_o + (base + j) * 8)[0];
          const float4 hi = reinterpret_cast<const float4*>(land_o + (base + j) * 8)[1];
          sum += f;
          acc[0] += f * lo.x; acc[1] += f * lo.y; acc[2] += f * lo.z; acc[3] += f * lo.w;
          acc[4] += f * hi.x; acc[5] += f * hi.y; acc[6] += f * hi.z; acc[7] += f * hi.w;
        }
        const float inv = 1.0f / sum;
        float4* d = reinterpret_cast<float4*>(out + (item * kRows + r) * kD + c * 8);
        d[0] = make_float4(acc[0] * inv, acc[1] * inv, acc[2] * inv, acc[3] * inv);
        d[1] = make_float4(acc[4] * inv, acc[5] * inv, acc[6] * inv, acc[7] * inv);
      }
      return;
    }
    for (int k = 0; k < passes; ++k) {
      const int idx = (k * n + split) * kThreads + tid;
      if (idx - lane >= items) break;  // warp-uniform
      const int part = idx & (g - 1), piece = idx / g, r = piece / kChunks, c = piece % kChunks;
      const int slot = k * kThreads + tid;
      float l = -INFINITY;
      float4 lo = make_float4(0, 0, 0, 0), hi = lo;
      if (idx < items && part < n) {
        l = land_l[slot];
        lo = reinterpret_cast<const float4*>(land_o + slot * 8)[0];
        hi = reinterpret_cast<const float4*>(land_o + slot * 8)[1];
      }
      if constexpr (M == kPushCopy) {  // the transfer alone: part 0's slot stored as it came
        if (idx < items && part == 0) {
          float4* d = reinterpret_cast<float4*>(out + (item * kRows + r) * kD + c * 8);
          d[0] = lo;
          d[1] = hi;
        }
        continue;
      }
      reduce_store(l, lo, hi, g, idx < items && part == 0, out + (item * kRows + r) * kD + c * 8);
    }
    if constexpr (M == kPushBar) {
      sm90::barrier_cluster_arrive_relaxed();
      sm90::barrier_cluster_wait();
    }
  }
#endif
}

template <Mode M>
float time_it(int items, int n, int work, float* out) {
  auto kernel = merge_kernel<M>;
  const int smem = (kRows * kOStride + 32 + 4 * kThreads * 9) * 4;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  flashbuf::detail::ClusterLaunchConfig launch(dim3(items * n), dim3(kThreads), smem, n);
  return replayed_launch_us([&](cudaStream_t st) {
    launch.config.stream = st;
    CK(cudaLaunchKernelEx(&launch.config, kernel, out, n, work));
  });
}

// The merged rows against the host's merge of the same parts.
bool check(const float* dev, int items, int n) {
  std::vector<float> h(items * kRows * kD);
  CK(cudaMemcpy(h.data(), dev, h.size() * 4, cudaMemcpyDeviceToHost));
  double worst = 0;
  for (int it = 0; it < items; ++it)
    for (int r = 0; r < kRows; ++r) {
      double mx = -INFINITY;
      for (int s = 0; s < n; ++s) mx = std::max<double>(mx, part_lse(it, s, r));
      for (int ch = 0; ch < kD; ++ch) {
        double num = 0, den = 0;
        for (int s = 0; s < n; ++s) {
          const double w = std::exp2(part_lse(it, s, r) - mx);
          num += w * part_o(it, s, r, ch);
          den += w;
        }
        worst = std::max(worst, std::fabs(num / den - h[(it * kRows + r) * kD + ch]));
      }
    }
  return worst < 1e-5;
}

int main() {
  const int items = 8, n = 8;
  float* out;
  CK(cudaMalloc(&out, items * n * kRows * kD * 4));
  printf("items %d, clusters of %d, 128 threads; us per graph-replayed launch (median of 7 x 20)\n", items, n);
  printf(" work | none    barriers pull   push   push+bar copy   serial | checks pull push push+bar serial\n");
  for (int work : {0, 2000, 8000}) {
    for (int round = 0; round < 3; ++round) {
      const float t0 = time_it<kNone>(items, n, work, out);
      CK(cudaMemset(out, 0, items * kRows * kD * 4));
      const float t1 = time_it<kPull>(items, n, work, out);
      const bool c1 = check(out, items, n);
      CK(cudaMemset(out, 0, items * kRows * kD * 4));
      const float t2 = time_it<kPush>(items, n, work, out);
      const bool c2 = check(out, items, n);
      CK(cudaMemset(out, 0, items * kRows * kD * 4));
      const float t3 = time_it<kPushBar>(items, n, work, out);
      const bool c3 = check(out, items, n);
      const float tb = time_it<kBarriers>(items, n, work, out);
      const float tc = time_it<kPushCopy>(items, n, work, out);
      CK(cudaMemset(out, 0, items * kRows * kD * 4));
      const float ts = time_it<kPushSerial>(items, n, work, out);
      const bool cs = check(out, items, n);
      printf("%5d | %6.2f %6.2f %6.2f %6.2f %6.2f %6.2f %6.2f | %d %d %d %d\n", work, t0, tb, t1, t2, t3, tc, ts, c1, c2, c3, cs);
    }
  }
  CK(cudaDeviceSynchronize());
  return 0;
}
