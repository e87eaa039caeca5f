// CPU backend: merge_states. Each (token, head) weighs its num_parts partial outputs relative
// to the largest LSE over them, as the GPU combine does (buffers/part_merge.cuh): part n weighs
// exp(lse_n - max), the output is sum_n w_n o_n / sum_n w_n and the LSE max + log(sum_n w_n),
// so nothing overflows. (Folding the parts pairwise instead would round the running LSE to fp32
// after each part: where |LSE| is large enough that its spacing exceeds ln 2, from about 1e7,
// equal parts would no longer weigh equally.) Parts with LSE = -inf are skipped, their O never
// read. Accumulation is fp32; the result is rounded to the output dtype once. Non-finite LSEs
// follow flashbuf.hpp's rule, as the GPU combine does: a NaN LSE makes the row NaN; +inf parts
// share all the weight equally, LSE = +inf.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "api/backends.hpp"
#include "cpu/element.hpp"
#include "cpu/parallel.hpp"
#include "flashbuf/core/config.hpp"

namespace flashbuf::detail {
namespace {

// (token, head) pairs per work item: enough to amortise the counter, small enough to balance.
constexpr std::int64_t kPairsPerItem = 256;

template <class E>
void run_merge(const MergeProblem& p) {
  using T = typename E::Storage;
  const std::int64_t pairs = static_cast<std::int64_t>(p.tokens) * p.heads;
  const std::int64_t items = (pairs + kPairsPerItem - 1) / kPairsPerItem;
  const int Dv = p.head_dim_v;
  struct Scratch {
    std::vector<float> acc, part;
  };
  cpu::parallel_for(
      items, 0, [&] { return Scratch{std::vector<float>(Dv), std::vector<float>(Dv)}; },
      [&](Scratch& sc, std::int64_t item) {
        const std::int64_t end = std::min(pairs, (item + 1) * kPairsPerItem);
        for (std::int64_t pair = item * kPairsPerItem; pair < end; ++pair) {
          const std::int64_t t = pair / p.heads, h = pair % p.heads;
          float lse = kNegInf;  // the empty merge: O = 0, LSE = -inf
          std::fill(sc.acc.begin(), sc.acc.end(), 0.0f);
          auto part_lse_of = [&](int n) {
            return p.lse_parts[n * p.lp_part_stride + t * p.lp_token_stride + h * p.lp_head_stride];
          };
          auto load_part = [&](int n) {
            const T* src = static_cast<const T*>(p.o_parts) + n * p.op_part_stride + t * p.op_token_stride +
                           h * p.op_head_stride;
            for (int d = 0; d < Dv; ++d) sc.part[d] = E::load(src[d]);
          };
          bool has_nan = false;
          int infinite_parts = 0;
          float max_lse = kNegInf;
          for (int n = 0; n < p.num_parts; ++n) {
            const float l = part_lse_of(n);
            has_nan |= std::isnan(l);
            infinite_parts += l == kPosInf;
            max_lse = std::max(max_lse, l);
          }
          if (has_nan) {
            lse = std::numeric_limits<float>::quiet_NaN();
            std::fill(sc.acc.begin(), sc.acc.end(), lse);
          } else if (infinite_parts > 0) {
            lse = kPosInf;
            for (int n = 0; n < p.num_parts; ++n) {
              if (part_lse_of(n) != kPosInf) continue;
              load_part(n);
              for (int d = 0; d < Dv; ++d) sc.acc[d] += sc.part[d] / static_cast<float>(infinite_parts);
            }
          } else if (max_lse != kNegInf) {  // (else no part saw a key: O = 0, LSE = -inf)
            float sum = 0.0f;  // >= 1: the part at the max weighs 1
            for (int n = 0; n < p.num_parts; ++n) {
              const float part_lse = part_lse_of(n);
              if (part_lse == kNegInf) continue;  // contributes nothing; its O may be garbage
              const float w = std::exp(part_lse - max_lse);
              load_part(n);
              for (int d = 0; d < Dv; ++d) sc.acc[d] += w * sc.part[d];
              sum += w;
            }
            const float inv = 1.0f / sum;
            for (int d = 0; d < Dv; ++d) sc.acc[d] *= inv;
            lse = max_lse + std::log(sum);
          }
          T* dst = static_cast<T*>(p.o) + t * p.o_token_stride + h * p.o_head_stride;
          for (int d = 0; d < Dv; ++d) dst[d] = E::store(sc.acc[d]);
          if (p.lse) p.lse[t * p.lse_token_stride + h * p.lse_head_stride] = lse;
        }
      });
}

}  // namespace

void cpu_merge_states(const MergeProblem& p) {
  cpu::with_element(p.dtype, [&](auto element) { run_merge<decltype(element)>(p); });
}

}  // namespace flashbuf::detail
