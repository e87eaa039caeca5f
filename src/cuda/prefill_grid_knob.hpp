// The persistent-grid knob of the Hopper prefill launcher, host-only so that the tests read
// it as the launcher does (a test whose comparison depends on the grid asks it).
#pragma once

#include <cstdlib>
#include <string>

namespace flashbuf::detail {

// FLASHBUF_PREFILL_GRID (tests and A/Bs; read once per process): `off` keeps a block per query
// block for every problem, `on` takes the persistent grid wherever it applies, whatever the
// items' length; n >= 1 does too, with at most n blocks (small problems then walk several
// items per block, e.g. under compute-sanitizer). Unset: persistent_grid_pays decides.
struct PersistentGridKnob {
  bool off = false, forced = false;
  int cap = 0;
};
inline PersistentGridKnob persistent_grid_knob() {
  static const PersistentGridKnob knob = [] {
    PersistentGridKnob k;
    const char* env = std::getenv("FLASHBUF_PREFILL_GRID");
    if (env == nullptr || *env == '\0') return k;
    const std::string v = env;
    k.off = v == "off";
    k.cap = std::atoi(env) > 0 ? std::atoi(env) : 0;
    k.forced = v == "on" || k.cap > 0;
    return k;
  }();
  return knob;
}

}  // namespace flashbuf::detail
