// Which grid the calling thread's last prefill launch took (src/cuda/prefill_launch.cuh sets it
// as it launches), host-only. The GPU tests that set the persistent walk against a block per
// item ask it: where a launcher rule declines the walk, both runs would be the same kernel and a
// bit-for-bit comparison could not fail, so the test fails instead.
#pragma once

namespace flashbuf::detail {

struct PrefillGridTaken {
  bool persistent = false;  // a persistent walk (batch-form, paged or varlen items), else a block per item
  int consumers = 0;        // the Hopper kernel's consumer warpgroups; 0 for the mma.sync kernel
};

inline thread_local PrefillGridTaken last_prefill_grid{};

}  // namespace flashbuf::detail
