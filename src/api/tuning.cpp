// API layer: the process-wide tuning overrides (flashbuf/tuning.hpp). Each field is an atomic,
// so the launchers read them on every launch without a lock.
#include "flashbuf/tuning.hpp"

#include <atomic>
#include <string>

#include "flashbuf/flashbuf.hpp"

namespace flashbuf {
namespace {

std::atomic<int> g_decode_splits{0};
std::atomic<int> g_decode_merge{static_cast<int>(DecodeMergeOverride::automatic)};
std::atomic<bool> g_decode_deep_ring{true};
std::atomic<int> g_prefill_grid{static_cast<int>(PrefillGridOverride::automatic)};
std::atomic<int> g_prefill_grid_blocks{0};

}  // namespace

void set_tuning_overrides(const TuningOverrides& o) {
  if (o.decode_splits < 0) {
    throw ArgumentError("decode_splits", "expected 0 (the heuristic) or a split count >= 1, got " +
                                             std::to_string(o.decode_splits));
  }
  if (o.prefill_grid_blocks < 0) {
    throw ArgumentError("prefill_grid_blocks", "expected 0 (one wave) or a block count >= 1, got " +
                                                   std::to_string(o.prefill_grid_blocks));
  }
  g_decode_splits.store(o.decode_splits, std::memory_order_relaxed);
  g_decode_merge.store(static_cast<int>(o.decode_merge), std::memory_order_relaxed);
  g_decode_deep_ring.store(o.decode_deep_ring, std::memory_order_relaxed);
  g_prefill_grid.store(static_cast<int>(o.prefill_grid), std::memory_order_relaxed);
  g_prefill_grid_blocks.store(o.prefill_grid_blocks, std::memory_order_relaxed);
}

TuningOverrides tuning_overrides() {
  TuningOverrides o;
  o.decode_splits = g_decode_splits.load(std::memory_order_relaxed);
  o.decode_merge = static_cast<DecodeMergeOverride>(g_decode_merge.load(std::memory_order_relaxed));
  o.decode_deep_ring = g_decode_deep_ring.load(std::memory_order_relaxed);
  o.prefill_grid = static_cast<PrefillGridOverride>(g_prefill_grid.load(std::memory_order_relaxed));
  o.prefill_grid_blocks = g_prefill_grid_blocks.load(std::memory_order_relaxed);
  return o;
}

}  // namespace flashbuf
