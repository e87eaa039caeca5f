// The bench tools' problem (bench/tune_prefill.cu, bench/trace_prefill.cu): one point of the
// BENCH.md prefill grid (16k tokens, `heads` heads, batch-form bf16), its tensors on the device,
// filled there (no host copy of a large input) with values of about unit variance.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "api/problem.hpp"

__global__ void fill_random(__nv_bfloat16* x, std::size_t n, unsigned seed) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
    // A sum of two uniforms on [0, 1) minus 1, scaled to unit variance (sqrt 6).
    const float u = (h & 0xffff) / 65536.0f + (h >> 16) / 65536.0f - 1.0f;
    x[i] = __float2bfloat16(u * 2.449f);
  }
}

// Sequences of S tokens (16k / S of them), `heads` query and K/V heads of D (Q, K) and Dv (V, O)
// columns; the tensors are freed with the object.
struct GridProblem {
  flashbuf::detail::AttentionProblem pr;
  __nv_bfloat16 *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;

  GridProblem(int s, int heads, int d, int dv, bool causal) {
    const int b = 16384 / s;
    const std::size_t nq = std::size_t(b) * s * heads * d, nv = std::size_t(b) * s * heads * dv;
    cudaMalloc(&q, nq * 2); cudaMalloc(&k, nq * 2); cudaMalloc(&v, nv * 2); cudaMalloc(&o, nv * 2);
    fill_random<<<1024, 256>>>(q, nq, 1); fill_random<<<1024, 256>>>(k, nq, 2); fill_random<<<1024, 256>>>(v, nv, 3);
    pr.batch = b; pr.heads_q = pr.heads_kv = heads; pr.head_dim = d; pr.head_dim_v = dv;
    pr.max_seqlen_q = pr.max_seqlen_k = pr.seqlen_q = pr.seqlen_k = s;
    pr.total_q = pr.total_k = std::int64_t(b) * s;
    pr.q = q; pr.k = k; pr.v = v; pr.o = o;
    pr.q_batch_stride = pr.k_batch_stride = std::int64_t(s) * heads * d;
    pr.v_batch_stride = pr.o_batch_stride = std::int64_t(s) * heads * dv;
    pr.q_row_stride = pr.k_row_stride = heads * d; pr.v_row_stride = pr.o_row_stride = heads * dv;
    pr.q_head_stride = pr.k_head_stride = d; pr.v_head_stride = pr.o_head_stride = dv;
    pr.softmax_scale = 1.0f / std::sqrt(float(d));
    pr.window_right = causal ? 0 : -1;
  }
  GridProblem(const GridProblem&) = delete;
  GridProblem& operator=(const GridProblem&) = delete;
  ~GridProblem() { cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(o); }
};
