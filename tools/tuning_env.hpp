// Tools layer: the tuning overrides of flashbuf/tuning.hpp parsed from environment-variable
// text, for the programs that take them there (the CLI, the GPU tests, and bench/bench.py
// through the Python extension's set_tuning_overrides, which gets the variables as a mapping),
// so that A/B and tuning runs keep their command lines. The library reads no environment.
//   FLASHBUF_DECODE_SPLITS=n      n >= 1 splits in every decode plan
//   FLASHBUF_DECODE_MERGE=m       cluster | workspace: how several splits merge
//   FLASHBUF_DECODE_RING=shared   every decode launch keeps the shallow staging ring
//   FLASHBUF_PREFILL_GRID=g       off: a block per query block; on: the persistent grid
//                                 wherever it applies; n >= 1: that grid with at most n blocks
// Unset or empty: the library's own choice. Anything else throws std::invalid_argument naming
// the variable.
#pragma once

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "flashbuf/tuning.hpp"

namespace flashbuf::tools {

namespace tuning_env_detail {
inline bool parse_count(const std::string& text, int& out) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 9) return false;
  out = std::stoi(text);
  return out >= 1;
}
[[noreturn]] inline void bad(const char* name, const std::string& value, const char* expected) {
  throw std::invalid_argument(std::string(name) + ": expected " + expected + ", got '" + value + "'");
}
}  // namespace tuning_env_detail

// The overrides the variables say, each looked up with `get(name)` ("" when unset).
template <class Lookup>
TuningOverrides tuning_overrides_from(Lookup get) {
  using namespace tuning_env_detail;
  TuningOverrides t;
  if (const std::string v = get("FLASHBUF_DECODE_SPLITS"); !v.empty()) {
    if (!parse_count(v, t.decode_splits)) bad("FLASHBUF_DECODE_SPLITS", v, "a split count >= 1");
  }
  if (const std::string v = get("FLASHBUF_DECODE_MERGE"); !v.empty()) {
    if (v == "cluster") t.decode_merge = DecodeMergeOverride::cluster;
    else if (v == "workspace") t.decode_merge = DecodeMergeOverride::workspace;
    else bad("FLASHBUF_DECODE_MERGE", v, "cluster or workspace");
  }
  if (const std::string v = get("FLASHBUF_DECODE_RING"); !v.empty()) {
    if (v != "shared") bad("FLASHBUF_DECODE_RING", v, "shared");
    t.decode_deep_ring = false;
  }
  if (const std::string v = get("FLASHBUF_PREFILL_GRID"); !v.empty()) {
    if (v == "off") t.prefill_grid = PrefillGridOverride::per_block;
    else if (v == "on") t.prefill_grid = PrefillGridOverride::persistent;
    else if (parse_count(v, t.prefill_grid_blocks)) t.prefill_grid = PrefillGridOverride::persistent;
    else bad("FLASHBUF_PREFILL_GRID", v, "off, on or a block count >= 1");
  }
  return t;
}

inline TuningOverrides tuning_overrides_from_environment() {
  return tuning_overrides_from([](const char* name) {
    const char* value = std::getenv(name);
    return value == nullptr ? std::string() : std::string(value);
  });
}

// Reads the environment and passes what it says to the library.
inline void apply_tuning_environment() { set_tuning_overrides(tuning_overrides_from_environment()); }

}  // namespace flashbuf::tools
