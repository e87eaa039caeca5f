// Dispatch of the sm80-class prefill to its instantiations. The list of instantiations is
// generated from FLASHBUF_INSTANTIATIONS (cmake/instantiations.cmake); the kernels themselves
// are compiled in the generated units, declared `extern template` here.
#include "api/backends.hpp"
#include "cuda/prefill_launch.cuh"
#include "instantiation_list.hpp"

namespace flashbuf::detail {

FLASHBUF_FOR_EACH_INSTANTIATION(FLASHBUF_DECLARE_PREFILL)

bool prefill_instantiated(DType dtype, int head_dim, int head_dim_v) {
#define FLASHBUF_MATCH(dt, d, dv) \
  if (dtype == DType::dt && head_dim == d && head_dim_v == dv) return true;
  FLASHBUF_FOR_EACH_INSTANTIATION(FLASHBUF_MATCH)
#undef FLASHBUF_MATCH
  return false;
}

void sm80_attention(const AttentionProblem& p) {
  FLASHBUF_CUDA_CHECK(cudaSetDevice(p.device_index));
#define FLASHBUF_LAUNCH(dt, d, dv)                                              \
  if (p.dtype == DType::dt && p.head_dim == d && p.head_dim_v == dv) {           \
    launch_prefill_sm80<dt, d, dv>(p);                                           \
    return;                                                                      \
  }
  FLASHBUF_FOR_EACH_INSTANTIATION(FLASHBUF_LAUNCH)
#undef FLASHBUF_LAUNCH
  throw RuntimeError("sm80_attention: no instantiation for this dtype/head dim "
                     "(validation should have rejected it)");
}

}  // namespace flashbuf::detail
