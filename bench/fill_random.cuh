// The bench tools' inputs (bench/tune_prefill.cu, bench/trace_prefill.cu): bf16 values from a
// hash of the index, about unit variance, filled on the device (no host copy of a large input).
#pragma once

#include <cuda_bf16.h>

#include <cstddef>

__global__ void fill_random(__nv_bfloat16* x, std::size_t n, unsigned seed) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
    // A sum of two uniforms on [0, 1) minus 1, scaled to unit variance (sqrt 6).
    const float u = (h & 0xffff) / 65536.0f + (h >> 16) / 65536.0f - 1.0f;
    x[i] = __float2bfloat16(u * 2.449f);
  }
}
