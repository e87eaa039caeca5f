// buffers: WgmmaTensorCore — the Hopper MMA description: wgmma.mma_async.m64nNk16 issued by a
// warpgroup (4 warps, 128 threads), fp32 accumulators, A from shared memory (descriptor) or
// from registers (the per-warp m16n8k16 A layout), B from shared memory, K-major or — for V —
// N-major through the descriptor's transpose bit.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "flashbuf/arch/sm90/wgmma.cuh"

namespace flashbuf {

enum class BMajor { k = 0, n = 1 };  // K-major ("col", like K) or N-major (like V)

template <class In>
struct WgmmaTensorCore {
  static_assert(std::is_same_v<In, __nv_bfloat16> || std::is_same_v<In, __half>,
                "WgmmaTensorCore: inputs must be bf16 or fp16");
  using in_type = In;
  using out_type = float;
  using Tag = std::conditional_t<std::is_same_v<In, __nv_bfloat16>, sm90::Bf16Tag, sm90::Fp16Tag>;
  static constexpr int kM = 64;   // rows per warpgroup
  static constexpr int kK = 16;
  static constexpr int kThreads = 128;

  template <int N, BMajor Major>
  __device__ __forceinline__ static void mma_ss(float (&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b,
                                                bool accumulate) {
    sm90::Wgmma<N, Tag>::template ss<static_cast<int>(Major)>(d, desc_a, desc_b, accumulate ? 1 : 0);
  }
  template <int N, BMajor Major>
  __device__ __forceinline__ static void mma_rs(float (&d)[N / 2], const std::uint32_t (&a)[4],
                                                std::uint64_t desc_b, bool accumulate) {
    sm90::Wgmma<N, Tag>::template rs<static_cast<int>(Major)>(d, a, desc_b, accumulate ? 1 : 0);
  }
};

}  // namespace flashbuf
