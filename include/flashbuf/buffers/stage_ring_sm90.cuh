// buffers: StageRing — how the stages of a K or V buffer pass between the producer warpgroup
// that fills them and the consumer warps that read them, on two mbarriers per stage:
//
//   producer:  acquire(i) -- wait "empty[s]"     fill stage s     commit_cp_async(i) -> "full[s]"
//                                               (or TMA:  expect_bytes(i, n) before the copy)
//   consumer:  wait(i)    -- wait "full[s]"      wgmma reads s    release(i)         -> "empty[s]"
//
// i counts tiles from 0; stage s = i % NumStages and round i / NumStages picks the parity (see
// arch/sm90/mbarrier.cuh). "full" expects one arrival per copying producer thread (cp.async:
// each thread arrives when its own copies land; TMA: the one issuing thread arrives and the
// phase also waits for the bytes; a TMA ring's stage may also be filled by cp.async, see
// arrive_full), "empty" one per consumer warp (lane 0, after the warp's wgmma that read the
// stage completed).
#pragma once

#include <cstdint>

#include "flashbuf/arch/sm90/mbarrier.cuh"
#include "flashbuf/arch/sm90/tma.cuh"

namespace flashbuf {

template <int NumStages>
struct StageRing {
  static constexpr int kStages = NumStages;
  static constexpr int kBarrierBytes = 2 * NumStages * sizeof(std::uint64_t);
  std::uint64_t* full = nullptr;   // [NumStages]
  std::uint64_t* empty = nullptr;  // [NumStages]

  __device__ static constexpr int stage(int i) { return i % NumStages; }
  __device__ static constexpr int parity(int i) { return (i / NumStages) & 1; }

  // Every thread binds, thread 0 initialises; the block synchronises before anyone waits.
  __device__ void init(std::uint64_t* barriers, int producer_threads, int consumer_warps) {
    full = barriers;
    empty = barriers + NumStages;
    if (threadIdx.x == 0) {
#pragma unroll
      for (int s = 0; s < NumStages; ++s) {
        sm90::mbarrier_init(&full[s], producer_threads);
        sm90::mbarrier_init(&empty[s], consumer_warps);
      }
    }
  }
  __device__ void acquire(int i) const { sm90::mbarrier_wait_parity(&empty[stage(i)], parity(i) ^ 1); }
  __device__ void commit_cp_async(int i) const { sm90::cp_async_mbarrier_arrive_noinc(&full[stage(i)]); }
  __device__ std::uint64_t* expect_bytes(int i, std::uint32_t bytes) const {
    sm90::mbarrier_arrive_expect_tx(&full[stage(i)], bytes);
    return &full[stage(i)];
  }
  // A stage of a TMA ring (one expected arrival) filled by cp.async instead: once every
  // copying thread's copies have landed (the caller waits and syncs them), one thread arrives.
  __device__ void arrive_full(int i) const { sm90::mbarrier_arrive(&full[stage(i)]); }
  __device__ void wait(int i) const { sm90::mbarrier_wait_parity(&full[stage(i)], parity(i)); }
  __device__ void release(int i) const {
    if (threadIdx.x % 32 == 0) sm90::mbarrier_arrive(&empty[stage(i)]);
  }
};

}  // namespace flashbuf
