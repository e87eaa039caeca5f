// buffers: the register-resident tiles of one warp — Q (A operand of S = Q K^T), P (the S
// accumulators, then the A operand of O += P V) and O (accumulators, rescaled by the online
// softmax, divided by the row sums at the end). Each warp owns MTiles m16 row tiles.
//
// Row ownership inside an m16 tile (core/fragment.hpp, mma_m16n8k16::c_coord): lane l holds
// rows l/4 ("lo") and l/4 + 8 ("hi"), columns 2*(l%4) and +1 of every n8 tile; the four
// lanes of a quad share a row, so row reductions are two xor-shuffles.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "flashbuf/arch/sm80/fast_math.cuh"
#include "flashbuf/arch/sm80/ldmatrix.cuh"
#include "flashbuf/buffers/concepts.cuh"
#include "flashbuf/buffers/smem_tile.cuh"
#include "flashbuf/buffers/tensor_core.cuh"

namespace flashbuf {

// Sets every element of a (nested) register array; fully unrolled, so it stays in registers.
template <class T, int N, class V>
__device__ __forceinline__ void fill_registers(T (&a)[N], V value) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if constexpr (std::is_array_v<T>) {
      fill_registers(a[i], value);
    } else {
      a[i] = static_cast<T>(value);
    }
  }
}

// Q: loaded once per block into shared memory (by the kernel's cp.async), then either kept
// in registers for every k-step (InRegisters, when the register budget allows) or re-read
// with ldmatrix per k-step (large head dims).
template <class TC, int MTiles, int D, int BM, bool InRegisters>
struct QRegisterBuffer {
  using TensorCore = TC;
  using In = typename TC::in_type;
  using Tile = SwizzledTile<BM, D>;
  static constexpr int kRows = MTiles * TC::kFragM;
  static constexpr int kCols = D;
  static constexpr int kKSteps = D / TC::kK;

  // The A fragments of one k-step for every m-tile, as a kernel stages them when it loads
  // k-step k + 1 while the MMAs of k-step k run (empty when Q stays in registers).
  using Stage = std::uint32_t[InRegisters ? 1 : MTiles][4];

  const In* smem = nullptr;
  int warp_row0 = 0;
  std::uint32_t frag[InRegisters ? MTiles : 1][InRegisters ? kKSteps : 1][4];

  __device__ void zero() { fill_registers(frag, 0); }
  __device__ void load_fragment(std::uint32_t (&r)[4], int mt, int k) const {
    const RowCol a = ldmatrix_x4::a_tile_row_address(threadIdx.x % 32);
    sm80::ldmatrix_x4(r, smem + SwizzledCursor<Tile>(warp_row0 + a.row, a.col).at(mt * TC::kFragM, k * TC::kK));
  }
  // Call after Q has landed in shared memory.
  __device__ void load_from_shared() {
    if constexpr (InRegisters) {
#pragma unroll
      for (int mt = 0; mt < MTiles; ++mt)
#pragma unroll
        for (int k = 0; k < kKSteps; ++k) load_fragment(frag[mt][k], mt, k);
    }
  }
  template <int K>
  __device__ const std::uint32_t (&mma_tile(int mt))[4] {
    if constexpr (InRegisters) {
      return frag[mt][K];
    } else {
      load_fragment(frag[0][0], mt, K);
      return frag[0][0];
    }
  }
  // The pipelined form of mma_tile: load_stage<K> reads k-step K into a stage, a_tile<K>
  // returns m-tile mt's fragment of it (or the resident one).
  template <int K>
  __device__ void load_stage(Stage& st) const {
    if constexpr (!InRegisters) {
#pragma unroll
      for (int mt = 0; mt < MTiles; ++mt) load_fragment(st[mt], mt, K);
    }
  }
  template <int K>
  __device__ const std::uint32_t (&a_tile(const Stage& st, int mt) const)[4] {
    if constexpr (InRegisters) {
      return frag[mt][K];
    } else {
      return st[mt];
    }
  }
};

// P: the fp32 S accumulators of MTiles x BN, masked and exponentiated in place; the A operand
// of k-step k is packed on the fly from n8 tiles 2k and 2k+1 (accumulator_as_a order).
template <class TC, int MTiles, int BN>
struct PRegisterBuffer {
  using TensorCore = TC;
  static constexpr int kRows = MTiles * TC::kFragM;
  static constexpr int kCols = BN;
  static constexpr int kNTiles = BN / TC::kFragN;
  static constexpr int kKSteps = BN / TC::kK;
  static constexpr PFragmentOrder kOrder = PFragmentOrder::accumulator_as_a;
  // P converted to 16-bit A fragments for every k-step: half the registers of s, so packing
  // all of it before O += P V frees registers for double-buffered V fragments.
  using Packed = std::uint32_t[MTiles][kKSteps][4];
  float s[MTiles][kNTiles][4];

  __device__ void zero() { fill_registers(s, 0.0f); }
  template <int K>
  __device__ void mma_tile(int mt, std::uint32_t (&a)[4]) const {
    a[0] = TC::pack(s[mt][2 * K][0], s[mt][2 * K][1]);
    a[1] = TC::pack(s[mt][2 * K][2], s[mt][2 * K][3]);
    a[2] = TC::pack(s[mt][2 * K + 1][0], s[mt][2 * K + 1][1]);
    a[3] = TC::pack(s[mt][2 * K + 1][2], s[mt][2 * K + 1][3]);
  }
  template <int K>
  __device__ auto mma_tile(int mt) const {
    struct A { std::uint32_t r[4]; } a;
    mma_tile<K>(mt, a.r);
    return a;
  }
  __device__ void pack(Packed& a) const {
    [&]<int... K>(std::integer_sequence<int, K...>) {
#pragma unroll
      for (int mt = 0; mt < MTiles; ++mt) (mma_tile<K>(mt, a[mt][K]), ...);
    }(std::make_integer_sequence<int, kKSteps>{});
  }
  // The V buffer that consumes P states the order it needs; check it here.
  template <class VBuf>
  static constexpr bool feeds() { return VBuf::kRequiredPOrder == kOrder; }
};

// O: fp32 accumulators of MTiles x Dv.
template <class TC, int MTiles, int Dv>
struct OutputRegisterBuffer {
  using TensorCore = TC;
  static constexpr int kRows = MTiles * TC::kFragM;
  static constexpr int kCols = Dv;
  static constexpr int kNTiles = Dv / TC::kFragN;
  float o[MTiles][kNTiles][4];

  __device__ void zero() { fill_registers(o, 0.0f); }
  // Multiply row lo / hi of m-tile mt by the online-softmax correction exp2(m_old - m_new).
  __device__ void rescale(int mt, float lo, float hi) {
#pragma unroll
    for (int n = 0; n < kNTiles; ++n) {
      o[mt][n][0] *= lo;
      o[mt][n][1] *= lo;
      o[mt][n][2] *= hi;
      o[mt][n][3] *= hi;
    }
  }
  // Whether this thread's elements of row lo (half 0) / hi (half 1) of m-tile mt hold a NaN:
  // a NaN in a visible value reaches O through P V but not the row sum. One compare per
  // element pair, in the epilogue only.
  // Four chains of pair tests joined at the end, not one chain of kNTiles: the test stands
  // between the last O += P V and the row sums on the epilogue's path.
  __device__ bool holds_nan(int mt, int half) const {
    bool nan[4] = {false, false, false, false};
#pragma unroll
    for (int n = 0; n < kNTiles; ++n) nan[n % 4] |= sm80::either_nan(o[mt][n][2 * half], o[mt][n][2 * half + 1]);
    return (nan[0] || nan[1]) || (nan[2] || nan[3]);
  }
  // Divide by the softmax denominators (row sums); a row with no visible key has sum 0 and
  // must come out as 0, not NaN; a NaN sum (the row read a NaN) stays NaN. A denominator with
  // an attention sink's term (sink_weight_log2 in core) is infinite for a row with no key: 0.
  // Any other sum is >= 1 (its maximum's term is exp2(0)), where the one-instruction
  // reciprocal is within 1 ulp and needs none of the IEEE division's range fix-ups.
  __device__ static float inverse_denominator(float sum) { return sum == 0.0f ? 0.0f : sm80::rcp_approx_ftz(sum); }
  __device__ void apply_softmax_denominator(int mt, float sum_lo, float sum_hi) {
    rescale(mt, inverse_denominator(sum_lo), inverse_denominator(sum_hi));
  }
};

static_assert(RegisterBuffer<OutputRegisterBuffer<MmaSyncTensorCore<__nv_bfloat16, true>, 2, 128>>);
static_assert(RegisterMMABuffer<QRegisterBuffer<MmaSyncTensorCore<__nv_bfloat16>, 2, 128, 128, true>>);
static_assert(RegisterBuffer<PRegisterBuffer<MmaSyncTensorCore<__nv_bfloat16>, 2, 64>>);

}  // namespace flashbuf
