// The backends behind the public entry points. The CPU backend is always built; the CUDA
// entry points are defined in src/cuda/ when nvcc is found and in src/nocuda/ (throwing a
// clear RuntimeError) otherwise, so the API layer compiles the same either way.
#pragma once

#include <cstddef>
#include <cstdint>

#include "api/problem.hpp"

namespace flashbuf::detail {

// CPU (src/cpu/): blocked flash-attention on oneDNN tile products, fp32 accumulation, on an
// OpenMP team. The extras are what AttentionProblem does not carry: the optional sinks (fp32,
// one per query head) and the worker count (0 = the OpenMP default).
struct CpuExtras {
  const float* sinks = nullptr;
  std::int64_t sinks_stride = 1;
  int num_threads = 0;
};
CpuExtras cpu_extras(const TensorView& sinks, int num_threads);
void cpu_attention(const AttentionProblem& p, const CpuExtras& extras = {});
void cpu_merge_states(const MergeProblem& p);
void cpu_append_kv(const AppendProblem& p);

// CUDA (src/cuda/ or src/nocuda/).
bool cuda_runtime_available();
DeviceInfo cuda_query_device(int device_index);
bool cuda_pointer_on_device(const void* ptr, int* device_index);  // false for host memory
// Prefill on the mma.sync (sm80-class) path; requires prefill_instantiated(...).
bool prefill_instantiated(DType dtype, int head_dim, int head_dim_v);
void sm80_attention(const AttentionProblem& p);
// Prefill on the Hopper (wgmma) path: compute capability 9.0 with sm_90a code in the binary.
bool sm90_prefill_available(int device_index);
void sm90_attention(const AttentionProblem& p);
// Decode: plan on the host, run without synchronising; requires decode_instantiated(...)
// (the list FLASHBUF_DECODE_INSTANTIATIONS compiles; false without CUDA).
bool decode_instantiated(DType dtype, int head_dim);
void cuda_plan_decode(const DecodeProblem& problem, DecodePlan& plan);
void cuda_decode(const DecodePlan& plan, const AttentionProblem& p, void* workspace);
void cuda_merge_states(const MergeProblem& p);
void cuda_append_kv(const AppendProblem& p);
// Copies `rows` runs of `row_bytes`, `src_pitch` bytes apart (>= row_bytes), from device memory
// to host, packed (validation of index tensors outside graph capture); returns false when the
// stream is capturing, in which case nothing is copied.
bool cuda_copy_rows_to_host_if_not_capturing(void* dst, const void* src, std::size_t row_bytes, std::size_t rows,
                                             std::size_t src_pitch, void* stream);

}  // namespace flashbuf::detail
