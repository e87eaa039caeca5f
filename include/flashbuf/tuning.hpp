// flashbuf tuning overrides: choices the library otherwise makes itself (how many splits a
// decode plan takes and how they merge, the decode kernel's deep staging ring, the Hopper
// prefill kernel's persistent grid), forced for tests, tuning runs and A/B benchmarks. The
// library never reads the environment: a tool that takes these from environment variables
// parses them itself (tools/tuning_env.hpp: the CLI and the GPU tests do; bench/bench.py hands
// the Python extension the variables' text) and passes the result to set_tuning_overrides.
// Host C++ only.
#pragma once

namespace flashbuf {

enum class DecodeMergeOverride : int {
  automatic = 0,  // the plan's heuristic
  cluster = 1,    // cap the heuristic's splits at what one thread-block cluster merges (sm_90);
                  // a forced split count above the cluster limit still merges in the workspace
  workspace = 2,  // never merge in clusters
};

enum class PrefillGridOverride : int {
  automatic = 0,   // the Hopper launcher decides where the persistent grid pays
  per_block = 1,   // a block per query block for every problem
  persistent = 2,  // the persistent grid wherever it applies, whatever the items' length
};

struct TuningOverrides {
  int decode_splits = 0;  // >= 1: every decode plan made afterwards takes this many splits (<= 1024)
  DecodeMergeOverride decode_merge = DecodeMergeOverride::automatic;
  bool decode_deep_ring = true;  // false: every decode launch keeps the shallow staging ring
  PrefillGridOverride prefill_grid = PrefillGridOverride::automatic;
  int prefill_grid_blocks = 0;  // >= 1: the persistent grid (as `persistent`) of at most this many blocks
};

// Process-wide: decode plans made and kernels launched after the call see the new overrides.
// Throws ArgumentError for values out of range (decode_splits < 0, prefill_grid_blocks < 0).
void set_tuning_overrides(const TuningOverrides& overrides);
TuningOverrides tuning_overrides();

}  // namespace flashbuf
