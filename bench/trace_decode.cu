// Measurement tool (GPU machine; not a test, not the benchmark of record): where the time of a
// latency-bound decode launch goes. It runs the library's decode block (decode_kernel.cuh's
// decode_split_kv_block, the lean kernel: a contiguous cache) in a kernel of its own whose hooks
// (block_trace.cuh) stamp each block's steps, for B 1 (or `batch`), Hq / Hkv heads, D 128 bf16, a
// cache of `keys` keys, `splits` splits merged in one thread-block cluster (the plan's choice for
// these rows: bench.py's decode rows name it). It prints
//   - µs per graph-replayed launch (bench/replay_timer.cuh) of the traced kernel, of the same
//     kernel built without stamps (-DTRACE_NO_STAMPS: then that line alone), and of an empty
//     kernel with the same grid, clusters and shared memory (the launch alone); the K/V cache
//     rotates over copies that together outgrow L2, as bench.py's inputs do;
//   - from `traces` launches, each after K and V were read out of L2 (or, `warm` 1, after a launch
//     on the same copy, so that they are in L2) and after a one-block marker kernel that stamps
//     its end: the medians over blocks and launches of each step, in ns (per-block steps
//     in SM cycles, %clock64, converted at the clock measured beside them; the blocks' starts
//     and ends against the marker by %globaltimer).
// The output is checked against a float64 reference first (max abs error printed).
//   nvcc -O3 -std=c++20 -arch=sm_90a --expt-relaxed-constexpr -Iinclude -Isrc bench/trace_decode.cu -o trd
// (or the target flashbuf_trace_decode of a build with -DFLASHBUF_BUILD_TUNER=ON)
//   ./trd [keys] [splits] [heads_q] [heads_kv] [batch] [traces] [warm: 0 / 1]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "block_clocks.cuh"

#ifndef TRACE_NO_STAMPS
#define FLASHBUF_BLOCK_TRACE
#endif

// The steps a block stamps (slot order). Each is thread 0's but keys_done, the latest warp's.
enum Step : int {
  kStart,       // the block's first instruction
  kIssued,      // Q's and the first tiles' copies issued (without a left window: before the length)
  kLength,      // its sequence's length loaded (loaded before the copies, used after them)
  kFirstTile,   // Q and tile 0 landed, every warp past the tile's barrier
  kKeysDone,    // the last warp's last product done
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
__device__ void flashbuf_trace_decode_copies_issued() { trace_record()[kIssued] = sm_cycles(); }
__device__ void flashbuf_trace_decode_length(int len) { trace_record()[kLength] = sm_cycles(len); }
__device__ void flashbuf_trace_decode_first_tile() { trace_record()[kFirstTile] = sm_cycles(); }
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

#include "cuda/cluster_launch.cuh"
#include "flashbuf/kernels/decode_kernel.cuh"
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
  const int keys = argc > 1 ? atoi(argv[1]) : 2048, splits = argc > 2 ? atoi(argv[2]) : 8;
  const int hq = argc > 3 ? atoi(argv[3]) : 32, hkv = argc > 4 ? atoi(argv[4]) : 8;
  const int batch = argc > 5 ? atoi(argv[5]) : 1, traces = argc > 6 ? atoi(argv[6]) : 5;
  const int warmth = argc > 7 ? atoi(argv[7]) : 0;  // 0: K and V out of L2 before each trace; 1: in L2
  const int group = hq / hkv, row_chunks = (group + Tile::kRows - 1) / Tile::kRows;
  if (hq % hkv || splits < 1 || splits > kMaxClusterSplits || keys < 1) {
    printf("usage: trd [keys] [splits 1..%d] [heads_q] [heads_kv, divides heads_q] [batch] [traces] [warm 0 / 1]\n", kMaxClusterSplits);
    return 2;
  }
  const dim3 grid(splits, hkv * row_chunks, batch);
  if (grid.x * grid.y * grid.z > kMaxBlocks) return printf("at most %d blocks\n", kMaxBlocks), 2;

  // Inputs: normal values, the cache rotating over enough copies to outgrow L2.
  const size_t cache_elems = size_t(batch) * keys * hkv * D, q_elems = size_t(batch) * hq * D;
  const int copies = std::max<int>(2, int(256e6 / (2 * cache_elems * sizeof(Elem))) + 1);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<Elem> hq_(q_elems), hk(cache_elems), hv(cache_elems);
  for (auto& x : hq_) x = __float2bfloat16(normal(rng));
  for (auto& x : hk) x = __float2bfloat16(normal(rng));
  for (auto& x : hv) x = __float2bfloat16(normal(rng));
  Elem *dq, *dk, *dv, *dout;
  int* dlen;
  CK(cudaMalloc(&dq, q_elems * sizeof(Elem)));
  CK(cudaMalloc(&dout, q_elems * sizeof(Elem)));
  CK(cudaMalloc(&dk, copies * cache_elems * sizeof(Elem)));
  CK(cudaMalloc(&dv, copies * cache_elems * sizeof(Elem)));
  CK(cudaMalloc(&dlen, batch * sizeof(int)));
  CK(cudaMemcpy(dq, hq_.data(), q_elems * sizeof(Elem), cudaMemcpyHostToDevice));
  for (int c = 0; c < copies; ++c) {
    CK(cudaMemcpy(dk + c * cache_elems, hk.data(), cache_elems * sizeof(Elem), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dv + c * cache_elems, hv.data(), cache_elems * sizeof(Elem), cudaMemcpyHostToDevice));
  }
  std::vector<int> lens(batch, keys);
  CK(cudaMemcpy(dlen, lens.data(), batch * sizeof(int), cudaMemcpyHostToDevice));

  // The lean kernel's parameters, as src/cuda/decode.cu builds them for this contiguous cache.
  DecodeParams p;
  p.q = dq;
  p.q_batch_stride = p.q_row_stride = std::int64_t(hq) * D;
  p.q_head_stride = D;
  p.k_batch_stride = p.v_batch_stride = std::int64_t(keys) * hkv * D;
  p.k_row_stride = p.v_row_stride = std::int64_t(hkv) * D;
  p.k_head_stride = p.v_head_stride = D;
  p.o = dout;
  p.o_batch_stride = p.o_row_stride = std::int64_t(hq) * D;
  p.o_head_stride = D;
  p.seqlens_k = dlen;
  p.batch = batch;
  p.group = group;
  p.group_div = FastDivmod(group);
  p.heads_kv = hkv;
  p.heads_q = hq;
  p.kv_capacity = keys;
  p.num_splits = splits;
  p.keys_per_split_static = split_keys(keys, splits, Tile::kBlockN);
  p.merge = splits > 1 ? SplitMerge::cluster : SplitMerge::none;
  p.score_scale = float(1.0 / std::sqrt(double(D)) * 1.4426950408889634);
  auto with_copy = [&](int c) {
    DecodeParams q = p;
    q.k = dk + size_t(c) * cache_elems;
    q.v = dv + size_t(c) * cache_elems;
    return q;
  };
  for (const void* k : {(const void*)&traced_decode, (const void*)&empty_block}) {
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, Tile::kSmemBytes));
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  }
  const int cluster = splits > 1 ? splits : 1;
  auto launch = [&](auto kernel, const DecodeParams& params, cudaStream_t st) {
    const detail::ClusterLaunchConfig cfg(grid, dim3(Tile::kThreads), Tile::kSmemBytes, cluster, st);
    CK(cudaLaunchKernelEx(&cfg.config, kernel, params));
  };

  // Correct first: O against a float64 reference.
  launch(traced_decode, with_copy(0), nullptr);
  CK(cudaDeviceSynchronize());
  std::vector<Elem> ho(q_elems);
  CK(cudaMemcpy(ho.data(), dout, q_elems * sizeof(Elem), cudaMemcpyDeviceToHost));
  double max_err = 0;
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < hq; ++h) {
      const Elem* q = &hq_[(size_t(b) * hq + h) * D];
      std::vector<double> s(keys), o(D, 0.0);
      double m = -INFINITY, l = 0;
      for (int j = 0; j < keys; ++j) {
        const Elem* k = &hk[((size_t(b) * keys + j) * hkv + h / group) * D];
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += double(__bfloat162float(q[d])) * __bfloat162float(k[d]);
        s[j] = dot / std::sqrt(double(D));
        m = std::max(m, s[j]);
      }
      for (int j = 0; j < keys; ++j) {
        const double w = std::exp(s[j] - m);
        l += w;
        const Elem* v = &hv[((size_t(b) * keys + j) * hkv + h / group) * D];
        for (int d = 0; d < D; ++d) o[d] += w * __bfloat162float(v[d]);
      }
      for (int d = 0; d < D; ++d)
        max_err = std::max(max_err, std::fabs(o[d] / l - __bfloat162float(ho[(size_t(b) * hq + h) * D + d])));
    }
  printf("B %d, %d/%d heads, D %d, %d keys, %d splits (cluster %d), %d blocks; max abs error %.2e against float64\n",
         batch, hq, hkv, D, keys, splits, cluster, grid.x * grid.y * grid.z, max_err);
  if (!(max_err < 2e-2)) return printf("wrong output: not timed\n"), 1;

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
      for (int s = kIssued; s < kSteps; ++s) {
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
  const char* names[kSteps] = {"", "start -> first copies issued", "-> length loaded", "-> Q and tile 0 landed", "-> keys done (last warp)",
                               "-> warps staged", "-> peers' landings open", "-> part sent (pushed)",
                               "-> peers' parts landed",
                               "-> rows stored (end)"};
  for (int s = kIssued; s < kSteps; ++s)
    printf("  %-36s %7.0f  (%zu blocks)\n", names[s], median(step_ns[s]), step_ns[s].size() / traces);
  return 0;
#endif
}
