// API layer: append_kv, the in-place write of new keys and values into a KV cache that
// FlashAttention's flash_attn_with_kvcache makes before it attends. Validates, then copies on
// the tensors' device.
#include "api/backends.hpp"
#include "api/validate.hpp"
#include "flashbuf/flashbuf.hpp"

namespace flashbuf {

Backend append_kv(const AppendKvArgs& args) {
  detail::require_usable_gpu(args.k_cache.device, args.k_cache.device_index);
  const detail::AppendProblem problem = detail::validate_append(args);
  const bool work = problem.batch > 0 && problem.seqlen_new > 0 && problem.heads_kv > 0;
  if (problem.device == DeviceKind::cpu) {
    if (work) detail::cpu_append_kv(problem);
    return Backend::cpu;
  }
  if (work) detail::cuda_append_kv(problem);
  return Backend::sm80;
}

void check_append_kv(const AppendKvArgs& args, CheckScope scope) {
  if (scope == CheckScope::full) detail::require_usable_gpu(args.k_cache.device, args.k_cache.device_index);
  detail::validate_append(args, scope);
}

}  // namespace flashbuf
