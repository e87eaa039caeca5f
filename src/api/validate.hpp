// API layer: argument validation. Turns the public argument structs into the normalised
// problems of api/problem.hpp, or throws flashbuf::ArgumentError naming the argument and what
// was expected. Nothing is launched or written here, so an error leaves every output as it was.
#pragma once

#include <string>

#include "api/problem.hpp"
#include "flashbuf/flashbuf.hpp"

namespace flashbuf::detail {

struct ValidationOptions {
  bool outputs = true;                 // false: o and lse are not looked at (output shapes)
  CheckScope scope = CheckScope::full;  // metadata: no pointer is read or compared
};

// Prefill / general attention. Reads the index tensors (cu_seqlens, seqlens_k, page_table) to
// check their contents: CPU tensors always, CUDA tensors only with args.check_index_contents
// (a copy and a stream synchronisation, skipped while the stream captures a CUDA graph).
AttentionProblem validate_attention(const AttentionArgs& args, const ValidationOptions& options = {});

// Decode: attention with q (B, q_per_seq, Hq, D), seqlens_k required, K/V contiguous
// (B, Smax, Hkv, D) or paged, all consistent with the plan; index contents as above.
AttentionProblem validate_decode(const DecodePlan& plan, const DecodeArgs& args,
                                 const ValidationOptions& options = {});

// The sizes plan_decode accepts (argument names are "problem.<field>").
void validate_decode_problem(const DecodeProblem& problem);

MergeProblem validate_merge(const MergeStatesArgs& args, const ValidationOptions& options = {});

// append_kv: shapes, dtypes, devices, strides; the caches may not overlap each other, k, v or
// themselves (a write would land on another). Index contents as validate_attention reads them.
// CheckScope::metadata: the checks that need no pointer, and an empty problem.
AppendProblem validate_append(const AppendKvArgs& args, CheckScope scope = CheckScope::full);

// CUDA tensors on a machine or build without a usable GPU: throws the RuntimeError that says
// why (no GPU, or the build's reason for having no CUDA). The entry points and their output-
// shape checks call it first, so that no message that would only matter on a GPU (an fp32
// input, an uninstantiated head dim) hides it; validate_* do not, so the GPU path's checks
// stay testable without a GPU.
void require_usable_gpu(DeviceKind device, int device_index);

// "(4, 512, 8, 128)"
std::string shape_string(const TensorView& view);

}  // namespace flashbuf::detail
