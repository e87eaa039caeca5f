// Measurement tool (GPU machine; not a test, not the benchmark of record): the Hopper
// block-per-item prefill kernel's blocks, each with its SM, its start and end time (%globaltimer)
// and when its first tile and its last product were done, for causal and unmasked problems of
// the BENCH.md grid (16k tokens) in the grid's own order (PrefillParams::sections off) and
// the launcher's (longest_first_section), each also timed, interleaved with the other.
// One CSV per problem and order (a row a block: the record below) goes to OUTDIR; the timings
// are printed; bench/trace_summary.py reads the CSVs. Build with -DFLASHBUF_BUILD_TUNER=ON,
// target flashbuf_trace_prefill:
//   flashbuf_trace_prefill OUTDIR
// (The kernel records the times where FLASHBUF_BLOCK_TRACE is defined: this unit only.)
#define FLASHBUF_BLOCK_TRACE
#include <cuda_bf16.h>

#include <cstddef>

#include "block_clocks.cuh"

// The kernel's trace hooks (prefill_sm90.cuh calls them where FLASHBUF_BLOCK_TRACE is defined),
// a record of kTraceSlots per block of the grid: start (thread 0), SM, first tile done and last
// product done (each the later of the two consumers), end (the later consumer's epilogue),
// query block, pair (head + 1024 * sequence), key tiles; then the steps of an item's start and
// end: the block's __syncthreads passed (thread 0), Q's TMA issued (thread 0), Q and K(0) landed
// as consumer 0 sees them, O divided and its warpgroup synced before the store (the later
// consumer), the barriers initialised and fenced (thread 0, before Q's TMA), and the block's
// item found (thread 0, once PrefillBlock::make's key range is known: before the barriers).
constexpr int kMaxTracedBlocks = 1 << 16, kTraceSlots = 14;
__device__ unsigned long long flashbuf_block_trace[kTraceSlots * kMaxTracedBlocks];
__device__ unsigned long long* trace_record() { return &flashbuf_block_trace[kTraceSlots * linear_block()]; }
__device__ unsigned long long trace_clock(int after = 0) { return global_ns(after); }
__device__ void flashbuf_trace_block_start() {
  unsigned long long* r = trace_record();
  r[0] = trace_clock();
  r[1] = sm_id();
}
__device__ void flashbuf_trace_first_tile_done() { atomicMax(trace_record() + 2, trace_clock()); }
__device__ void flashbuf_trace_last_product() { atomicMax(trace_record() + 3, trace_clock()); }
__device__ void flashbuf_trace_block_end(int m_block, int pair, int tiles) {
  unsigned long long* r = trace_record();
  atomicMax(r + 4, trace_clock());
  r[5] = m_block;
  r[6] = pair;
  r[7] = tiles;
}
__device__ void flashbuf_trace_barriers_ready() { trace_record()[8] = trace_clock(); }
__device__ void flashbuf_trace_q_issued() { trace_record()[9] = trace_clock(); }
__device__ void flashbuf_trace_operands_ready() { trace_record()[10] = trace_clock(); }
__device__ void flashbuf_trace_output_final() { atomicMax(trace_record() + 11, trace_clock()); }
__device__ void flashbuf_trace_barriers_initialised() { trace_record()[12] = trace_clock(); }
// Read once make's key range is known, so not above make's arithmetic and loads.
__device__ void flashbuf_trace_block_found(int keys_end) { trace_record()[13] = trace_clock(keys_end); }
// With -DTRACE_TILES, the per-block kernel's steady loops also stamp every tile of each
// consumer (warp 0's, %clock64: the SM's cycles, one counter for the block's warps): K(i) landed,
// S(i) done, the tile's softmax done. A record of kTileStamps per (block, consumer, tile) for the
// first kTileBlocks blocks and kTiles tiles; without the flag the hook is empty and the kernel
// the per-block trace's. Built by nvcc as bench/trace_variants.py builds this unit, with
// -DTRACE_TILES added, it runs the steady tile's problems only and writes, beside each
// problem's CSV, ...-tiles.csv, which bench/tile_overlap.py reads (the consumers' softmaxes
// side by side).
#ifdef TRACE_TILES
constexpr int kTileBlocks = 4096, kTileConsumers = 3, kTiles = 128, kTileStamps = 3;
constexpr std::size_t kTileTraceSize = std::size_t(kTileBlocks) * kTileConsumers * kTiles * kTileStamps;
__device__ unsigned long long flashbuf_tile_trace[kTileTraceSize];
#endif
__device__ __forceinline__ void flashbuf_trace_tile(int consumer, int tile, int stamp, float after) {
#ifdef TRACE_TILES
  const unsigned long long t = sm_cycles(after);
  const unsigned block = linear_block();
  if (threadIdx.x % 128 == 0 && block < kTileBlocks && tile < kTiles)
    flashbuf_tile_trace[((std::size_t(block) * kTileConsumers + consumer) * kTiles + tile) * kTileStamps + stamp] = t;
#else
  (void)consumer, (void)tile, (void)stamp, (void)after;
#endif
}
constexpr const char* kTraceColumns =
    "start,sm,first_tile,last_product,end,m_block,pair,tiles,barriers_ready,q_issued,operands_ready,output_final,"
    "barriers_initialised,block_found";

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda/prefill_launch.cuh"
#include "grid_problem.cuh"

namespace {
using namespace flashbuf;
using In = __nv_bfloat16;

// A kernel of this unit's own: the library's prefill_sm90_kernel is compiled without the trace.
// Consumers and BlockN as the library's launches take them (D 64's long items: three consumers
// over 192-row items, src/cuda/prefill_launch.cuh).
template <int D, int Dv, int Consumers, int BlockN>
__global__ void __launch_bounds__(PrefillSm90<In, D, Dv, false, Consumers, BlockN>::kThreads, 1)
    traced_prefill(const __grid_constant__ PrefillParams params, const __grid_constant__ PrefillTmaMaps maps) {
  extern __shared__ __align__(128) char smem[];
  PrefillSm90<In, D, Dv, false, Consumers, BlockN>::run(params, maps, smem);
}

#ifdef TRACE_TILES
// The tile stamps of the launch just traced (its launch cleared them first: see run), a row
// per (block, consumer) that stamped: block, consumer, then each tile's three stamps in order.
void write_tile_trace(const std::string& name, std::size_t blocks) {
  std::vector<unsigned long long> stamps(kTileTraceSize);
  cudaMemcpyFromSymbol(stamps.data(), flashbuf_tile_trace, stamps.size() * 8);
  FILE* f = std::fopen(name.c_str(), "w");
  std::fprintf(f, "block,consumer,stamps (k_landed s_done softmax_done a tile)\n");
  for (std::size_t b = 0; b < std::min<std::size_t>(blocks, kTileBlocks); ++b)
    for (int c = 0; c < kTileConsumers; ++c) {
      const unsigned long long* r = &stamps[(b * kTileConsumers + c) * kTiles * kTileStamps];
      int n = kTiles;  // tiles 0 .. the last stamped (the item's first tile has no stamps)
      while (n > 0 && r[(n - 1) * kTileStamps + 2] == 0) --n;
      if (n == 0) continue;
      std::fprintf(f, "%zu,%d", b, c);
      for (int k = 0; k < n * kTileStamps; ++k) std::fprintf(f, ",%llu", r[k]);
      std::fprintf(f, "\n");
    }
  std::fclose(f);
}
#endif

template <int D, int Dv, int Consumers = prefill_sm90_tile(D, Dv).consumers,
          int BlockN = prefill_sm90_tile(D, Dv).block_n>
void run(const char* out, int s, bool causal) {
  using Kernel = PrefillSm90<In, D, Dv, false, Consumers, BlockN>;
  const int h = D == 192 ? 10 : 2048 / D, b = 16384 / s;
  const GridProblem problem(s, h, D, Dv, causal);
  const detail::AttentionProblem& pr = problem.pr;
  PrefillParams p = detail::make_prefill_params(pr, Kernel::kBM, 0);
  const PrefillTmaMaps maps = detail::make_prefill_tma_maps<Kernel::kBN, Kernel::kBM>(pr);
  cudaFuncSetAttribute(&traced_prefill<D, Dv, Consumers, BlockN>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       Kernel::kSmemBytes);
  const int pairs = h * b, wave = detail::device_wave<Kernel>(pr);
  const int rule = longest_first_section(MaskParams{s, s, -1, causal ? 0 : -1}, p.num_m_blocks, pairs, wave);
  std::vector<int> orders = {rule};
  if (rule > 0) orders.insert(orders.begin(), 0);
  const dim3 grid(p.num_m_blocks, h, b);
  if (std::size_t(grid.x) * grid.y * grid.z > kMaxTracedBlocks) return;
  auto launch = [&](int order) {
    p.sections = SectionOrder(order, p.num_m_blocks, pairs, h);
    traced_prefill<D, Dv, Consumers, BlockN><<<grid, Kernel::kThreads, Kernel::kSmemBytes>>>(p, maps);
  };
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0); cudaEventCreate(&e1);
  std::vector<std::vector<float>> ms(orders.size());
  for (int o2 = 0; o2 < (int)orders.size(); ++o2) launch(orders[o2]);
  for (int rep = 0; rep < 9; ++rep)
    for (int i = 0; i < (int)orders.size(); ++i) {
      cudaEventRecord(e0);
      for (int r = 0; r < 10; ++r) launch(orders[i]);
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float t; cudaEventElapsedTime(&t, e0, e1);
      ms[i].push_back(t / 10);
    }
  const double flops = 2.0 * b * h * double(s) * s * (D + Dv) / (causal ? 2 : 1);
  for (int i = 0; i < (int)orders.size(); ++i) {
    std::sort(ms[i].begin(), ms[i].end());
    std::printf("D=%d Dv=%d causal=%d S=%5d section=%2d (rule %d, pairs %d) %7.1f TFLOP/s\n", D, Dv, causal, s,
                orders[i], rule, pairs, flops / (ms[i][4] * 1e-3) / 1e12);
    // One traced launch, after a warm one.
    const std::size_t blocks = std::size_t(grid.x) * grid.y * grid.z;
    std::vector<unsigned long long> trace(kTraceSlots * blocks);
    launch(orders[i]);
    unsigned long long* dev = nullptr;
    cudaGetSymbolAddress(reinterpret_cast<void**>(&dev), flashbuf_block_trace);
    cudaMemset(dev, 0, trace.size() * 8);
#ifdef TRACE_TILES
    unsigned long long* tiles = nullptr;
    cudaGetSymbolAddress(reinterpret_cast<void**>(&tiles), flashbuf_tile_trace);
    cudaMemset(tiles, 0, kTileTraceSize * 8);
#endif
    launch(orders[i]);
    cudaDeviceSynchronize();
    cudaMemcpy(trace.data(), dev, trace.size() * 8, cudaMemcpyDeviceToHost);
    const std::string name = std::string(out) + "/trace-d" + std::to_string(D) + "-s" + std::to_string(s) + "-c" +
                             std::to_string(causal) + "-sec" + std::to_string(orders[i]) + ".csv";
    FILE* f = std::fopen(name.c_str(), "w");
    std::fprintf(f, "%s\n", kTraceColumns);
    for (std::size_t j = 0; j < blocks; ++j) {
      const unsigned long long* r = &trace[kTraceSlots * j];
      for (int k = 0; k < kTraceSlots; ++k) std::fprintf(f, k + 1 < kTraceSlots ? "%llu," : "%llu\n", r[k]);
    }
    std::fclose(f);
#ifdef TRACE_TILES
    write_tile_trace(name.substr(0, name.size() - 4) + "-tiles.csv", blocks);
#endif
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) std::printf("error %s\n", cudaGetErrorString(err));
  cudaEventDestroy(e0); cudaEventDestroy(e1);
}
}  // namespace

int main(int argc, char** argv) {
  const char* out = argc > 1 ? argv[1] : ".";
#ifdef TRACE_TILES
  // The steady tile where the per-block kernel trails FA4: D 128 and D 64 unmasked, D 128 causal.
  for (int s : {8192, 16384}) {
    run<128, 128>(out, s, false);
    run<64, 64, 3, prefill_sm90_tile(64, 64, true).block_n>(out, s, false);
  }
  run<128, 128>(out, 8192, true);
#else
  for (int s : {2048, 4096, 8192, 16384}) {
    run<192, 128>(out, s, true);
    run<256, 256>(out, s, true);
  }
  run<192, 128>(out, 4096, false);
  run<256, 256>(out, 8192, false);
  // D 128: where the per-block kernel trails FA4 most (unmasked S >= 8k), and causal beside it.
  for (int s : {8192, 16384}) {
    run<128, 128>(out, s, false);
    run<128, 128>(out, s, true);
  }
  // D 64's long items: three consumers over 192 rows (FA4's tile), unmasked and causal.
  for (int s : {4096, 16384}) {
    run<64, 64, 3, prefill_sm90_tile(64, 64, true).block_n>(out, s, false);
    run<64, 64, 3, prefill_sm90_tile(64, 64, true).block_n>(out, s, true);
  }
#endif
  return 0;
}
