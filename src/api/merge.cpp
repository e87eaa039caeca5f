// API layer: merge_states, the combine of partial attention results (split-KV, cascade and
// ring attention build on it). Validates, then runs on the tensors' device.
#include "api/backends.hpp"
#include "api/validate.hpp"
#include "flashbuf/flashbuf.hpp"

namespace flashbuf {

OutputShapes merge_output_shapes(const MergeStatesArgs& args, CheckScope scope) {
  if (scope == CheckScope::full) detail::require_usable_gpu(args.o_parts.device, args.o_parts.device_index);
  const detail::MergeProblem p = detail::validate_merge(args, {/*outputs=*/false, scope});
  OutputShapes shapes;
  shapes.o_rank = 3;
  shapes.o[0] = p.tokens, shapes.o[1] = p.heads, shapes.o[2] = p.head_dim_v;
  shapes.lse_rank = 2;
  shapes.lse[0] = p.tokens, shapes.lse[1] = p.heads;
  return shapes;
}

Backend merge_states(const MergeStatesArgs& args) {
  detail::require_usable_gpu(args.o_parts.device, args.o_parts.device_index);
  const detail::MergeProblem problem = detail::validate_merge(args);
  if (problem.device == DeviceKind::cpu) {
    if (problem.tokens > 0 && problem.heads > 0) detail::cpu_merge_states(problem);
    return Backend::cpu;
  }
  if (problem.tokens > 0 && problem.heads > 0) detail::cuda_merge_states(problem);
  return Backend::sm80;
}

}  // namespace flashbuf
