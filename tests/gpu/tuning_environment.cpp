// The GPU tests take the tuning overrides from the environment, as the CLI does
// (tools/tuning_env.hpp): scripts/gpu_cycle.sh reruns the Hopper prefill tests on a grid of a
// few blocks with FLASHBUF_PREFILL_GRID=3. Applied before any test runs.
#include "tuning_env.hpp"

namespace {
const bool kApplied = [] {
  flashbuf::tools::apply_tuning_environment();
  return true;
}();
}  // namespace
