// Which grid the calling thread's last prefill launch took (src/cuda/prefill_launch.cuh sets it
// as it launches), host-only. The GPU tests that set the persistent walk against a block per
// item ask it: where a launcher rule declines the walk, both runs would be the same kernel and a
// bit-for-bit comparison could not fail, so the test fails instead. A test sets it to `none`
// before the run it asks about, so that a run that launches nothing is not read as the last one.
#pragma once

namespace flashbuf::detail {

enum class PrefillGrid { none, block_per_item, persistent_walk };

inline thread_local PrefillGrid last_prefill_grid = PrefillGrid::none;

}  // namespace flashbuf::detail
