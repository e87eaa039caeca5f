// API layer: merge_states, the combine of partial attention results (split-KV, cascade and
// ring attention build on it). Validates, then runs on the tensors' device.
#include "api/backends.hpp"
#include "api/validate.hpp"
#include "flashbuf/flashbuf.hpp"

namespace flashbuf {

Backend merge_states(const MergeStatesArgs& args) {
  const detail::MergeProblem problem = detail::validate_merge(args);
  if (problem.device == DeviceKind::cpu) {
    if (problem.tokens > 0 && problem.heads > 0) detail::cpu_merge_states(problem);
    return Backend::cpu;
  }
  if (problem.tokens > 0 && problem.heads > 0) detail::cuda_merge_states(problem);
  return Backend::sm80;
}

}  // namespace flashbuf
