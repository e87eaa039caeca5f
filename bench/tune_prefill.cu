// Tuning tool (not a test, not the benchmark of record): times the sm80-class prefill kernel
// with alternative tiles on the BENCH.md grid shapes, so the tile table's choices come from
// measurement. Build with -DFLASHBUF_BUILD_TUNER=ON; run on the GPU machine:
//   build/flashbuf_tune_prefill [S] [both|causal|full]
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda/prefill_launch.cuh"
#include "grid_problem.cuh"

namespace {

using namespace flashbuf;
using In = __nv_bfloat16;

template <int D, class Tile>
void time_variant(const char* name, int s, bool causal) {
  const int b = 16384 / s, h = 2048 / D;
  const GridProblem problem(s, h, D, D, causal);
  const detail::AttentionProblem& pr = problem.pr;
  const PrefillParams p = detail::make_prefill_params(pr, Tile::value.block_m, 0);
  auto launch = [&] {
    detail::launch_prefill_kernel<PrefillSm80<In, D, D, false, Tile>>(&prefill_sm80_kernel<In, D, D, false, Tile>, p,
                                                                      pr);
  };
  launch();
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0); cudaEventCreate(&e1);
  std::vector<float> ms;
  for (int rep = 0; rep < 7; ++rep) {
    cudaEventRecord(e0);
    for (int i = 0; i < 10; ++i) launch();
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float t; cudaEventElapsedTime(&t, e0, e1);
    ms.push_back(t / 10);
  }
  std::sort(ms.begin(), ms.end());
  const double flops = 4.0 * b * h * double(s) * s * D / (causal ? 2 : 1);
  const cudaError_t err = cudaGetLastError();
  std::printf("D=%3d causal=%d S=%5d %-22s %7.1f TFLOP/s %s\n", D, causal, s, name,
              flops / (ms[3] * 1e-3) / 1e12, err == cudaSuccess ? "" : cudaGetErrorString(err));
}

}  // namespace

int main(int argc, char** argv) {
  const int s = argc > 1 ? std::atoi(argv[1]) : 4096;
  const std::string masks = argc > 2 ? argv[2] : "both";  // both, causal or full
  for (bool causal : {false, true}) {
    if (masks != "both" && causal != (masks == "causal")) continue;
    time_variant<64, TileShape<128, 64, 4, 2, true>>("128x64 w4 m2 qreg", s, causal);
    time_variant<64, TileShape<128, 128, 4, 2, true>>("128x128 w4 m2 qreg", s, causal);
    time_variant<64, TileShape<128, 128, 4, 2, false>>("128x128 w4 m2", s, causal);
    time_variant<64, TileShape<64, 64, 4, 1, true>>("64x64 w4 m1 qreg", s, causal);
    time_variant<64, TileShape<64, 128, 4, 1, true>>("64x128 w4 m1 qreg", s, causal);
    time_variant<64, TileShape<128, 64, 8, 1, true>>("128x64 w8 m1 qreg", s, causal);
    time_variant<128, TileShape<128, 64, 4, 2, false>>("128x64 w4 m2", s, causal);
    time_variant<128, TileShape<64, 64, 4, 1, true>>("64x64 w4 m1 qreg", s, causal);
    time_variant<128, TileShape<64, 64, 4, 1, false>>("64x64 w4 m1", s, causal);
    time_variant<128, TileShape<64, 128, 4, 1, false>>("64x128 w4 m1", s, causal);
    time_variant<128, TileShape<128, 128, 8, 1, false>>("128x128 w8 m1", s, causal);
    time_variant<256, TileShape<128, 64, 8, 1, false>>("128x64 w8 m1", s, causal);
    time_variant<256, TileShape<64, 64, 4, 1, false>>("64x64 w4 m1", s, causal);
    time_variant<256, TileShape<64, 32, 4, 1, false>>("64x32 w4 m1", s, causal);
  }
  return 0;
}
