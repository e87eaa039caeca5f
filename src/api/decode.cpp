// API layer: token generation. plan_decode sizes the split-KV work once per batch shape;
// decode validates against the plan and runs without synchronising on CUDA tensors. On the
// CPU, decode is plain attention on the normalised problem (one split, no workspace).
#include "api/backends.hpp"
#include "api/validate.hpp"
#include "flashbuf/flashbuf.hpp"

namespace flashbuf {

DecodePlan plan_decode(const DecodeProblem& problem) {
  detail::validate_decode_problem(problem);
  DecodePlan plan;
  plan.problem = problem;
  if (problem.device == DeviceKind::cpu) {
    // The CPU backend tiles over queries and walks every key of a row in one pass: no split.
    plan.num_splits = 1;
    plan.keys_per_split = problem.max_seqlen_k;
    plan.workspace_bytes = 0;
    return plan;
  }
  detail::cuda_plan_decode(problem, plan);
  return plan;
}

OutputShapes decode_output_shapes(const DecodePlan& plan, const DecodeArgs& args, CheckScope scope) {
  if (scope == CheckScope::full) detail::require_usable_gpu(args.q.device, args.q.device_index);
  const detail::AttentionProblem p = detail::validate_decode(plan, args, {/*outputs=*/false, scope});
  OutputShapes shapes;
  shapes.o_rank = 4;
  shapes.o[0] = p.batch, shapes.o[1] = p.seqlen_q, shapes.o[2] = p.heads_q, shapes.o[3] = p.head_dim_v;
  shapes.lse_rank = 3;
  shapes.lse[0] = p.batch, shapes.lse[1] = p.heads_q, shapes.lse[2] = p.seqlen_q;
  return shapes;
}

Backend decode(const DecodePlan& plan, const DecodeArgs& args) {
  detail::require_usable_gpu(args.q.device, args.q.device_index);
  const detail::AttentionProblem problem = detail::validate_decode(plan, args);
  if (problem.device == DeviceKind::cpu) {
    if (problem.batch > 0) detail::cpu_attention(problem, detail::cpu_extras(args.sinks, args.num_threads));
    return Backend::cpu;
  }
  // No early return for batch 0 on the GPU: the launch shape depends on the plan only, and
  // the decode kernels handle empty work themselves (graph capture sees one launch pattern).
  detail::cuda_decode(plan, problem, args.workspace);
  return Backend::sm80;
}

}  // namespace flashbuf
