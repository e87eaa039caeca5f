// API layer: the `attention` entry point (prefill and general attention) and device
// discovery. Validates, picks the backend, runs it; see flashbuf.hpp for the contract.
#include "api/backends.hpp"
#include "api/validate.hpp"
#include "flashbuf/flashbuf.hpp"

namespace flashbuf {
namespace {

// Automatic: CPU tensors run on the CPU backend; CUDA tensors on the Hopper (wgmma) path on
// compute capability 9.0 when this binary holds its sm_90a code, else on the mma.sync path:
// the Hopper kernel is faster for batch-form and paged K/V alike (bench/NOTES-prefill.md,
// "Measurements behind the code's choices"); varlen and seqlens_k K/V go through TMA too. An
// explicit backend must match where the tensors are and what the device can run.
Backend choose_backend(Backend requested, const detail::AttentionProblem& p) {
  const bool on_gpu = p.device == DeviceKind::cuda;
  switch (requested) {
    case Backend::automatic:
      if (!on_gpu) return Backend::cpu;
      return detail::sm90_prefill_available(p.device_index) ? Backend::sm90 : Backend::sm80;
    case Backend::cpu:
      if (on_gpu) throw ArgumentError("backend", "cpu was requested but the tensors are CUDA tensors");
      return Backend::cpu;
    case Backend::sm80:
      if (!on_gpu) throw ArgumentError("backend", "sm80 was requested but the tensors are CPU tensors");
      return Backend::sm80;
    case Backend::sm90:
      if (!on_gpu) throw ArgumentError("backend", "sm90 was requested but the tensors are CPU tensors");
      if (!detail::sm90_prefill_available(p.device_index))
        throw ArgumentError("backend", "sm90 was requested but the device is not compute capability 9.0 "
                                       "or this build has no sm_90a code (FLASHBUF_CUDA_ARCHS)");
      return Backend::sm90;
  }
  throw ArgumentError("backend", "unknown backend " + std::to_string(static_cast<int>(requested)));
}

// True when no output row exists (empty batch, fixed-length queries of length 0, or varlen
// queries that are all empty).
bool no_query_rows(const detail::AttentionProblem& p) {
  return p.batch == 0 || p.max_seqlen_q == 0 || p.total_q == 0;
}

}  // namespace

Backend attention(const AttentionArgs& args) {
  detail::require_usable_gpu(args.q.device, args.q.device_index);
  const detail::AttentionProblem problem = detail::validate_attention(args);
  const Backend backend = choose_backend(args.backend, problem);
  if (no_query_rows(problem)) return backend;  // nothing to write
  switch (backend) {
    case Backend::cpu: detail::cpu_attention(problem, detail::cpu_extras(args.sinks, args.num_threads)); break;
    case Backend::sm80: detail::sm80_attention(problem); break;
    case Backend::sm90: detail::sm90_attention(problem); break;
    default: break;
  }
  return backend;
}

OutputShapes attention_output_shapes(const AttentionArgs& args, CheckScope scope) {
  if (scope == CheckScope::full) detail::require_usable_gpu(args.q.device, args.q.device_index);
  const detail::AttentionProblem p = detail::validate_attention(args, {/*outputs=*/false, scope});
  OutputShapes shapes;
  if (args.cu_seqlens_q.present()) {  // not p.varlen_q(): metadata-only views carry no pointer
    shapes.o_rank = 3;
    shapes.o[0] = p.total_q, shapes.o[1] = p.heads_q, shapes.o[2] = p.head_dim_v;
    shapes.lse_rank = 2;
    shapes.lse[0] = p.heads_q, shapes.lse[1] = p.total_q;
  } else {
    shapes.o_rank = 4;
    shapes.o[0] = p.batch, shapes.o[1] = p.seqlen_q, shapes.o[2] = p.heads_q, shapes.o[3] = p.head_dim_v;
    shapes.lse_rank = 3;
    shapes.lse[0] = p.batch, shapes.lse[1] = p.heads_q, shapes.lse[2] = p.seqlen_q;
  }
  return shapes;
}

bool cuda_available() { return detail::cuda_runtime_available(); }

DeviceInfo cuda_device_info(int device_index) { return detail::cuda_query_device(device_index); }

}  // namespace flashbuf
