// buffers: the Hopper atom of TiledTensorCore (tensor_core.cuh): wgmma.mma_async.m64nNk16
// issued by a warpgroup (4 warps, 128 threads), fp32 accumulators (each warp's 16 rows in the
// m16n8 C-fragment layout), A from shared memory (descriptor) or from registers (the per-warp
// m16n8k16 A layout), B from shared memory: K-major, or N-major (TransposeB: V) through the
// descriptor's transpose bit.
#pragma once

#include <cstdint>
#include <type_traits>

#include "flashbuf/arch/sm90/wgmma.cuh"
#include "flashbuf/buffers/tensor_core.cuh"

namespace flashbuf {

enum class BMajor { k = 0, n = 1 };  // K-major ("col", like K) or N-major (like V)

template <class In, int N, int GroupSize, bool TransposeB>
struct TiledTensorCore<float, In, MmaShape<64, N, 16>, GroupSize, TransposeB>
    : detail::TensorCoreElements<In, GroupSize, TransposeB> {
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "TiledTensorCore: wgmma's N is a multiple of 8 up to 256");
  static constexpr int kM = 64;  // rows per warpgroup
  static constexpr int kN = N;
  static constexpr int kK = 16;
  static constexpr int kThreads = 128;
  static constexpr BMajor kBMajor = TransposeB ? BMajor::n : BMajor::k;
  using Tag = std::conditional_t<std::is_same_v<In, __nv_bfloat16>, sm90::Bf16Tag, sm90::Fp16Tag>;

  // D (+)= A B: A and B from shared-memory descriptors.
  __device__ __forceinline__ static void mma_ss(float (&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b,
                                                bool accumulate) {
    sm90::Wgmma<N, Tag>::template ss<static_cast<int>(kBMajor)>(d, desc_a, desc_b, accumulate ? 1 : 0);
  }
  // D (+)= A B: A from this warp's registers (the m16n8k16 A fragment), B from a descriptor.
  __device__ __forceinline__ static void mma_rs(float (&d)[N / 2], const std::uint32_t (&a)[4],
                                                std::uint64_t desc_b, bool accumulate) {
    sm90::Wgmma<N, Tag>::template rs<static_cast<int>(kBMajor)>(d, a, desc_b, accumulate ? 1 : 0);
  }
};

// The Hopper kernels' descriptions: an N-column product with B K-major (S = Q K^T, N = the
// key tile) or N-major (O += P V, N = the value head dim).
template <class In, int N, bool TransposeB = false>
using WgmmaTensorCore = TiledTensorCore<float, In, MmaShape<64, N, 16>, 1, TransposeB>;

}  // namespace flashbuf
