// Core layer: division by a run-time constant with a multiply and a shift (Granlund-Montgomery,
// as in CUTLASS's FastDivmod), for divisors known at launch: the page size of a paged KV cache
// (buffers/kv_source.cuh, for prefill and decode alike) and decode's GQA group. Host-tested
// for exactness (tests/host/test_decode_plan.cpp).
#pragma once

#include <cstdint>

#include "flashbuf/core/config.hpp"

namespace flashbuf {

// Exact for 0 <= n < 2^31.
struct FastDivmod {
  int divisor = 1;
  std::uint32_t multiplier = 0;
  int shift = 0;  // quotient = umulhi(n, multiplier) >> shift, or n when divisor == 1

  FastDivmod() = default;
  FLASHBUF_HOST_DEVICE constexpr explicit FastDivmod(int d) : divisor(d < 1 ? 1 : d) {
    if (divisor == 1) return;
    int l = 0;  // ceil(log2(divisor))
    while ((1ll << l) < divisor) ++l;
    multiplier = static_cast<std::uint32_t>(((1ull << (31 + l)) + divisor - 1) / divisor);
    shift = l - 1;
  }
  FLASHBUF_HOST_DEVICE constexpr int div(int n) const {
    if (divisor == 1) return n;
    const std::uint32_t hi =
        static_cast<std::uint32_t>((static_cast<std::uint64_t>(static_cast<std::uint32_t>(n)) * multiplier) >> 32);
    return static_cast<int>(hi >> shift);
  }
};

}  // namespace flashbuf
