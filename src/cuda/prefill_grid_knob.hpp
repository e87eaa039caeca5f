// The persistent-grid override of the Hopper prefill launcher (flashbuf/tuning.hpp's
// prefill_grid and prefill_grid_blocks), host-only so that the tests read it as the launcher
// does (a test whose comparison depends on the grid asks it).
#pragma once

#include "flashbuf/tuning.hpp"

namespace flashbuf::detail {

// `off` keeps a block per query block for every problem; `forced` takes the persistent grid
// wherever it applies, whatever the items' length, with at most `cap` blocks when cap >= 1
// (small problems then walk several items per block, e.g. under compute-sanitizer). Neither:
// persistent_grid_pays decides.
struct PersistentGridKnob {
  bool off = false, forced = false;
  int cap = 0;
};
inline PersistentGridKnob persistent_grid_knob() {
  const TuningOverrides t = tuning_overrides();
  PersistentGridKnob k;
  k.off = t.prefill_grid == PrefillGridOverride::per_block;
  k.cap = t.prefill_grid_blocks > 0 ? t.prefill_grid_blocks : 0;
  k.forced = !k.off && (t.prefill_grid == PrefillGridOverride::persistent || k.cap > 0);
  return k;
}

}  // namespace flashbuf::detail
