// The varlen order knob of the Hopper prefill launcher, host-only (tests and A/Bs read it as the
// launcher does).
#pragma once

#include <cstdlib>
#include <cstring>

namespace flashbuf::detail {

// FLASHBUF_VARLEN_ORDER=off (read once per process) launches varlen batches in grid order
// (query block, head, sequence) instead of longest first (core/work_order.hpp).
inline bool varlen_order_off() {
  static const bool off = [] {
    const char* env = std::getenv("FLASHBUF_VARLEN_ORDER");
    return env != nullptr && std::strcmp(env, "off") == 0;
  }();
  return off;
}

}  // namespace flashbuf::detail
