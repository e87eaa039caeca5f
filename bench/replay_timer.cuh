// The single-file measurement tools' timer (bench/stream_rate.cu, bench/cluster_merge_rate.cu,
// bench/cluster_placement.cu): microseconds per launch of `launch(stream)` (one kernel launch),
// captured 20 times into a CUDA graph and replayed: the median of 7 timed replays, each right
// after an untimed one.
// Errors end the program with the failing call (CK).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                        \
  do {                                               \
    cudaError_t e = (x);                             \
    if (e != cudaSuccess) {                          \
      printf("%s: %s\n", #x, cudaGetErrorString(e)); \
      exit(1);                                       \
    }                                                \
  } while (0)

template <class Launch>
float replayed_launch_us(Launch launch) {
  constexpr int kLaunches = 20, kReplays = 7;
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < kLaunches; ++i) launch(st);
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> ts;
  for (int rep = 0; rep < kReplays; ++rep) {
    CK(cudaGraphLaunch(ge, st));
    CK(cudaEventRecord(a, st));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaEventRecord(b, st));
    CK(cudaStreamSynchronize(st));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    ts.push_back(ms * 1000.f / kLaunches);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CK(cudaStreamDestroy(st));
  std::sort(ts.begin(), ts.end());
  return ts[kReplays / 2];
}
