// Measurement tool (GPU machine; not a test, not the benchmark of record): where the time of a
// latency-bound decode launch goes. It runs the library's decode block (decode_kernel.cuh's
// decode_split_kv_block, the lean kernel: a contiguous cache) in a kernel of its own whose hooks
// (block_trace.cuh) stamp each block's steps, with the parameters the library's launch makes
// (make_decode_params) for B 1 (or `batch`), Hq / Hkv heads, D 128 bf16, a cache of `keys` keys,
// and the library's plan (or `splits` forced), merged in one thread-block cluster. It prints
//   - the check of the output against the float64 reference (reference/check.hpp), and of the
//     guard bytes around every tensor (reference/device_mirror.hpp);
//   - µs per graph-replayed launch (bench/replay_timer.cuh) of the traced kernel (or, built with
//     -DTRACE_NO_STAMPS, of the same kernel without stamps: then that line alone) and of an empty
//     kernel with the same grid, clusters and shared memory (the launch alone); the K/V cache
//     rotates over copies that together outgrow L2, as bench.py's inputs do;
//   - from `traces` launches, each after K and V were read out of L2 (or, `warm` 1, after a launch
//     on the same copy, so that they are in L2) and after a one-block marker kernel that stamps
//     its end: the medians over blocks and launches of each step, in ns (per-block steps
//     in SM cycles, %clock64, converted at the clock measured beside them; the blocks' starts
//     and ends against the marker by %globaltimer).
// Built as the targets flashbuf_trace_decode and flashbuf_trace_decode_unstamped of a build with
// -DFLASHBUF_BUILD_TUNER=ON (they link the library and its reference; on the GPU machine
// scripts/gpu/trace_decode_build.sh SRC BUILD builds both):
//   flashbuf_trace_decode [keys] [splits, 0: the plan's] [heads_q] [heads_kv] [batch] [traces] [warm: 0 / 1]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "block_clocks.cuh"

#ifndef TRACE_NO_STAMPS
#define FLASHBUF_BLOCK_TRACE
#endif

// The steps a block stamps (slot order). Each is thread 0's but keys_done, the latest warp's.
enum Step : int {
  kStart,       // the block's first instruction
  kMergeRead,   // the launch's merge read from the parameters (the push merge's landing is next)
  kFenced,      // thread 0 initialised the landing barrier and passed its fence
  kOpened,      // the warp's cluster arrival made
  kQIssued,     // Q's copies issued
  kIssued,      // the first tiles' copies issued too (without a left window: before the length)
  kLength,      // its sequence's length loaded (loaded before the copies, used after them)
  kOwnLanded,   // thread 0's own copies of Q and tile 0 landed (its wait for the group passed)
  kFirstTile,   // Q and tile 0 landed, every warp past the tile's barrier
  // Tiles 1 .. kTracedTiles - 1, three slots each (tile_slot): thread 0's products of the step
  // before done, its own copies of the tile landed, every warp past the tile's barrier.
  kLaterTiles,
  kKeysDone = kLaterTiles + 3 * 3,  // the last warp's last product done
  kStaged,      // every warp's O and (max, sum) in shared memory
  kPeersOpen,   // the push merge's cluster wait passed: every peer's landing is initialised
  kPartSent,    // the warps merged and the block's part pushed (or, one split, O stored)
  kLanded,      // the peers' parts landed in this block's shared memory (the push merge)
  kEnd,         // this block's merged rows stored
  kSteps,
  kStartNs = kSteps, kEndNs, kSlots
};
constexpr int kMaxBlocks = 4096;
__device__ unsigned long long trace_slots[kSlots * kMaxBlocks];
__device__ unsigned long long* trace_record() { return &trace_slots[kSlots * linear_block()]; }

__device__ void flashbuf_trace_decode_start() {
  unsigned long long* r = trace_record();
  r[kStartNs] = global_ns();
  r[kStart] = sm_cycles();
}
__device__ void flashbuf_trace_decode_merge_read() { trace_record()[kMergeRead] = sm_cycles(); }
__device__ void flashbuf_trace_decode_landing_fenced() { trace_record()[kFenced] = sm_cycles(); }
__device__ void flashbuf_trace_decode_landing_opened() { trace_record()[kOpened] = sm_cycles(); }
__device__ void flashbuf_trace_decode_q_issued() { trace_record()[kQIssued] = sm_cycles(); }
__device__ void flashbuf_trace_decode_copies_issued() { trace_record()[kIssued] = sm_cycles(); }
__device__ void flashbuf_trace_decode_length(int len) { trace_record()[kLength] = sm_cycles(len); }
constexpr int kTracedTiles = 1 + (kKeysDone - kLaterTiles) / 3;
// Tile t's slot of the three above (0: the step before done; 1: landed; 2: past the barrier).
__device__ int tile_slot(int t, int which) {
  return t == 0 ? (which == 1 ? kOwnLanded : kFirstTile) : kLaterTiles + 3 * (t - 1) + which;
}
__device__ void flashbuf_trace_decode_step_done(int t, int last_product) {
  if (t + 1 < kTracedTiles) trace_record()[tile_slot(t + 1, 0)] = sm_cycles(last_product);
}
__device__ void flashbuf_trace_decode_own_copies_landed(int t) {
  if (t < kTracedTiles) trace_record()[tile_slot(t, 1)] = sm_cycles();
}
__device__ void flashbuf_trace_decode_tile_ready(int t) {
  if (t < kTracedTiles) trace_record()[tile_slot(t, 2)] = sm_cycles();
}
__device__ void flashbuf_trace_decode_keys_done(int last_product) {
  atomicMax(trace_record() + kKeysDone, sm_cycles(last_product));
}
__device__ void flashbuf_trace_decode_staged() { trace_record()[kStaged] = sm_cycles(); }
__device__ void flashbuf_trace_decode_peers_open() { trace_record()[kPeersOpen] = sm_cycles(); }
__device__ void flashbuf_trace_decode_part_sent() { trace_record()[kPartSent] = sm_cycles(); }
__device__ void flashbuf_trace_decode_landed() { trace_record()[kLanded] = sm_cycles(); }
__device__ void flashbuf_trace_decode_end() {
  unsigned long long* r = trace_record();
  r[kEnd] = sm_cycles();
  r[kEndNs] = global_ns();
}

#include "api/validate.hpp"
#include "cuda/cluster_launch.cuh"
#include "cuda/decode_launch.cuh"
#include "flashbuf/tuning.hpp"
#include "reference/check.hpp"
#include "reference/device_mirror.hpp"
#include "reference/spec.hpp"
#include "replay_timer.cuh"

using namespace flashbuf;
using namespace flashbuf::kernels::decode;
using Elem = __nv_bfloat16;
constexpr int D = 128, MT = 1;
using Tile = DecodeTile<D, MT>;

__global__ void __launch_bounds__(Tile::kThreads) traced_decode(const __grid_constant__ DecodeParams p) {
  decode_split_kv_block<Elem, D, MT, /*Lean=*/true>(p);
}
__global__ void __launch_bounds__(Tile::kThreads) empty_block(const __grid_constant__ DecodeParams) {}
__global__ void marker(unsigned long long* at) { *at = global_ns(); }
// Reads a buffer larger than L2 (a sum, so the loads stay): K and V out of L2 without leaving
// dirty lines there to write back, as between the launches of a rotated replay.
__global__ void read_through(const uint4* buf, size_t vecs, unsigned* sink) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < vecs; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = buf[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;
}
// SM cycles per ns: one block spins about 200 µs reading both clocks.
__global__ void clock_rate(double* rate) {
  const unsigned long long c0 = sm_cycles(), t0 = global_ns();
  while (global_ns() - t0 < 200000) {
  }
  *rate = double(sm_cycles() - c0) / double(global_ns() - t0);
}

[[maybe_unused]] static double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  const int keys = argc > 1 ? atoi(argv[1]) : 2048, splits = argc > 2 ? atoi(argv[2]) : 0;
  const int hq = argc > 3 ? atoi(argv[3]) : 32, hkv = argc > 4 ? atoi(argv[4]) : 8;
  const int batch = argc > 5 ? atoi(argv[5]) : 1, traces = argc > 6 ? atoi(argv[6]) : 5;
  const int warmth = argc > 7 ? atoi(argv[7]) : 0;  // 0: K and V out of L2 before each trace; 1: in L2
  if (hq % hkv || hq / hkv > Tile::kRows || splits < 0 || splits > kMaxClusterSplits || keys < 1) {
    printf("usage: flashbuf_trace_decode [keys] [splits 0 (the plan's) or 1..%d] [heads_q] [heads_kv, heads_q / heads_kv <= %d] "
           "[batch] [traces] [warm 0 / 1]\n", kMaxClusterSplits, Tile::kRows);
    return 2;
  }

  // The problem as the tests make it (reference/spec.hpp): random normal inputs, a poisoned
  // output between guards, the float64 reference to check it against.
  reference::ProblemSpec spec;
  spec.batch = batch;
  spec.seqlen_k = keys;
  spec.use_seqlens_k = true;
  spec.heads_q = hq;
  spec.heads_kv = hkv;
  spec.head_dim = spec.head_dim_v = D;
  spec.dtype = DType::bf16;
  spec.lse = false;
  reference::Rng rng(7);
  reference::AttentionTensors t = reference::make_tensors(spec, rng);
  // The library's plan, or `splits` forced into one cluster: this tool's kernel has no combine.
  if (splits > 0) {
    TuningOverrides forced;
    forced.decode_splits = splits;
    forced.decode_merge = DecodeMergeOverride::cluster;
    set_tuning_overrides(forced);
  }
  const DecodePlan plan = plan_decode(reference::decode_problem(spec, DeviceKind::cuda));
  if (plan.workspace_bytes != 0) {
    printf("the plan merges its %d splits through the workspace; give splits <= %d\n", plan.num_splits, kMaxClusterSplits);
    return 2;
  }

  // The tensors' device mirrors, with guard bytes (reference/device_mirror.hpp); K and V also
  // rotate over further copies, enough to outgrow L2 together (copy 0: the mirrors).
  const reference::DeviceProblem mirrors(t);
  const reference::TensorPointers dev = mirrors.pointers();
  const size_t kv_bytes = t.k.storage_bytes();
  const int copies = std::max<int>(2, int(256e6 / (2 * kv_bytes)) + 1);
  auto further_copies = [&](const reference::HostTensor& h) {
    char* d;
    CK(cudaMalloc(&d, (copies - 1) * kv_bytes));
    for (int c = 0; c < copies - 1; ++c) CK(cudaMemcpy(d + c * kv_bytes, h.data(), kv_bytes, cudaMemcpyHostToDevice));
    return d;
  };
  const char* const k_copies = further_copies(t.k);
  const char* const v_copies = further_copies(t.v);
  // The kernel's parameters as the library's launch makes them (src/cuda/decode.cu).
  const DecodeArgs args = reference::bind_decode(spec, t, DeviceKind::cuda, &dev);
  const DecodeParams p = detail::make_decode_params(plan, detail::validate_decode(plan, args));
  const dim3 grid(plan.num_splits, hkv, batch);  // one row chunk: heads_q / heads_kv <= 16 rows
  if (grid.x * grid.y * grid.z > kMaxBlocks) return printf("at most %d blocks\n", kMaxBlocks), 2;
  auto with_copy = [&](int c) {
    DecodeParams q = p;
    if (c > 0) {
      q.k = k_copies + size_t(c - 1) * kv_bytes;
      q.v = v_copies + size_t(c - 1) * kv_bytes;
    }
    return q;
  };
  for (const void* k : {(const void*)&traced_decode, (const void*)&empty_block}) {
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, Tile::kSmemBytes));
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  }
  const int cluster = plan.num_splits > 1 ? plan.num_splits : 1;
  auto launch = [&](auto kernel, const DecodeParams& params, cudaStream_t st) {
    const detail::ClusterLaunchConfig cfg(grid, dim3(Tile::kThreads), Tile::kSmemBytes, cluster, st);
    CK(cudaLaunchKernelEx(&cfg.config, kernel, params));
  };

  // Correct first: O against the float64 reference, the guards intact.
  launch(traced_decode, with_copy(0), nullptr);
  CK(cudaDeviceSynchronize());
  mirrors.download_outputs(t);
  const reference::AttentionCheck check = reference::check_attention(spec, t);
  const std::string overwritten = mirrors.guard_violations();
  printf("B %d, %d/%d heads, D %d, %d keys, %d splits (cluster %d), %d blocks; %s\n", batch, hq, hkv, D, keys,
         plan.num_splits, cluster, grid.x * grid.y * grid.z, check.summary().c_str());
  if (!check.ok) return printf("wrong output: not timed\n"), 1;
  if (!overwritten.empty()) return printf("guards overwritten next to: %s; not timed\n", overwritten.c_str()), 1;

  int copy = 0;
  const float us = replayed_launch_us([&](cudaStream_t st) { launch(traced_decode, with_copy(copy++ % copies), st); });
  const float empty = replayed_launch_us([&](cudaStream_t st) { launch(empty_block, p, st); });
#ifdef TRACE_NO_STAMPS
  printf("us per launch: decode block without stamps %.2f, empty block %.2f\n", us, empty);
  return 0;
#else
  printf("us per launch: decode block with stamps %.2f, empty block %.2f\n", us, empty);

  double* drate;
  unsigned long long* dmark;
  CK(cudaMalloc(&drate, sizeof(double)));
  CK(cudaMalloc(&dmark, sizeof(unsigned long long)));
  clock_rate<<<1, 1>>>(drate);
  double rate;
  CK(cudaMemcpy(&rate, drate, sizeof(double), cudaMemcpyDeviceToHost));
  void* flush;
  const size_t flush_bytes = 256u << 20;
  CK(cudaMalloc(&flush, flush_bytes));

  const int blocks = grid.x * grid.y * grid.z;
  std::vector<std::vector<double>> step_ns(kSteps);  // per step: its time since the step before
  std::vector<double> launch_gap, span, first_start_spread;
  std::vector<unsigned long long> rec(size_t(kSlots) * blocks);
  CK(cudaMemset(flush, 1, flush_bytes));
  // Cold: K and V out of L2 (read through a larger buffer); warm: the same copy again, in L2.
  const bool cold = warmth == 0;
  for (int t = 0; t < traces; ++t) {
    if (cold) {
      read_through<<<264, 1024>>>(static_cast<const uint4*>(flush), flush_bytes / 16, reinterpret_cast<unsigned*>(dmark));
    } else {
      launch(traced_decode, with_copy(0), nullptr);
    }
    unsigned long long* slots;
    CK(cudaGetSymbolAddress((void**)&slots, trace_slots));
    CK(cudaMemset(slots, 0, rec.size() * 8));
    marker<<<1, 1>>>(dmark);
    launch(traced_decode, with_copy(cold ? t % copies : 0), nullptr);
    CK(cudaDeviceSynchronize());
    unsigned long long mark;
    CK(cudaMemcpy(&mark, dmark, 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(rec.data(), slots, rec.size() * 8, cudaMemcpyDeviceToHost));
    unsigned long long first = ~0ull, last_start = 0, last = 0;
    for (int i = 0; i < blocks; ++i) {
      const unsigned long long* r = &rec[size_t(kSlots) * i];
      first = std::min(first, r[kStartNs]);
      last_start = std::max(last_start, r[kStartNs]);
      last = std::max(last, r[kEndNs]);
      unsigned long long prev = r[kStart];
      for (int s = kMergeRead; s < kSteps; ++s) {
        if (r[s] == 0) continue;  // a step this block does not take (kLanded: not a merging block)
        step_ns[s].push_back(double(r[s] - prev) / rate);
        prev = r[s];
      }
    }
    launch_gap.push_back(double(first - mark));
    first_start_spread.push_back(double(last_start - first));
    span.push_back(double(last - first));
  }
  printf("SM clock %.3f GHz (measured); medians over %d traced launches, %s, ns:\n", rate, traces,
         cold ? "K and V out of L2" : "K and V in L2 (the same copy again)");
  printf("  marker's end -> first block starts   %7.0f\n", median(launch_gap));
  printf("  first -> last block starts           %7.0f\n", median(first_start_spread));
  printf("  first block starts -> last block ends %6.0f\n", median(span));
  std::vector<std::string> names = {"", "start -> merge read from the params", "-> landing barrier init + fence",
                                     "-> cluster arrival made", "-> Q's copies issued", "-> first tiles' copies issued",
                                     "-> length loaded", "-> thread 0's copies landed", "-> tile 0 barrier passed"};
  for (int t = 1; t < kTracedTiles; ++t) {
    names.push_back("-> thread 0's step " + std::to_string(t - 1) + " products done");
    names.push_back("-> its copies of tile " + std::to_string(t) + " landed");
    names.push_back("-> tile " + std::to_string(t) + " barrier passed");
  }
  for (const char* n : {"-> keys done (last warp)", "-> warps staged", "-> peers' landings open", "-> part sent (pushed)",
                        "-> peers' parts landed", "-> rows stored (end)"})
    names.push_back(n);
  for (int s = kMergeRead; s < kSteps; ++s)
    if (!step_ns[s].empty()) printf("  %-36s %7.0f  (%zu blocks)\n", names[s].c_str(), median(step_ns[s]), step_ns[s].size() / traces);
  return 0;
#endif
}
