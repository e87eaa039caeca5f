// CPU backend: the Kahan-compensated accumulations of the online softmax (online_softmax.hpp).
// Built with -ffp-contract=off (CMakeLists.txt): fusing a * r + y into one multiply-add would
// change what the compensation term measures. Vectorised for each instruction set as
// online_softmax.cpp is (target clones).
#include "cpu/online_softmax.hpp"
#include "cpu/target_clones.hpp"

namespace flashbuf::detail::cpu {

FLASHBUF_CPU_CLONES void accumulate_tile(float* acc, float* comp, const float* tile, float rescale, int n) {
  if (rescale == 1.0f) {
    for (int d = 0; d < n; ++d) {
      const float y = tile[d] - comp[d];
      const float t = acc[d] + y;
      comp[d] = (t - acc[d]) - y;
      acc[d] = t;
    }
    return;
  }
  for (int d = 0; d < n; ++d) {
    const float a = acc[d] * rescale;
    const float y = tile[d] - comp[d] * rescale;
    const float t = a + y;
    comp[d] = (t - a) - y;
    acc[d] = t;
  }
}

void compensated_fold(float& sum, float& compensation, float add, float rescale) {
  const float scaled = sum * rescale;
  const float y = add - compensation * rescale;
  const float t = scaled + y;
  compensation = (t - scaled) - y;
  sum = t;
}

}  // namespace flashbuf::detail::cpu
