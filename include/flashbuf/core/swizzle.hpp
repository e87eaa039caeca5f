// Core layer: Swizzle<Bits, Base, Shift>, the XOR permutation of element offsets that
// spreads the rows of a shared-memory tile across the 32 banks, so that the 8 lanes of one
// 16-byte access phase (ldmatrix, cp.async, st.shared.v4) hit 8 different bank groups.
// Same meaning as CuTe's Swizzle; the TMA/wgmma 32B/64B/128B modes are special cases.
//
// apply(offset): the `Bits` bits starting at bit Base + Shift are XORed into the `Bits`
// bits starting at bit Base. Offsets are in elements.
//
// Swizzle<3,3,3> on a bf16 tile with 64 columns (row pitch 128 bytes = all 32 banks):
//
//   element offset:  ... | 8 7 6 | 5 4 3 | 2 1 0 |
//                        |row % 8| chunk | elem  |   chunk = 16-byte group of 8 bf16
//                            |       ^
//                            +--XOR--+              physical chunk = chunk ^ (row % 8)
//
//   physical chunk (bank group: banks 4*chunk .. 4*chunk+3) of logical chunk c in row r:
//
//     r \ c | 0  1  2  3  4  5  6  7
//     ------+------------------------
//       0   | 0  1  2  3  4  5  6  7
//       1   | 1  0  3  2  5  4  7  6
//       2   | 2  3  0  1  6  7  4  5
//       3   | 3  2  1  0  7  6  5  4
//       4   | 4  5  6  7  0  1  2  3
//       5   | 5  4  7  6  1  0  3  2
//       6   | 6  7  4  5  2  3  0  1
//       7   | 7  6  5  4  3  2  1  0
//
//   Every column of the table is a permutation of 0..7: eight lanes reading one logical
//   chunk column of 8 consecutive rows (an ldmatrix 8x8 matrix) hit eight different bank
//   groups. Unswizzled, all eight would hit bank group c: an 8-way conflict.
//
// Swizzle<2,3,3> (bf16, 32 columns = 64-byte rows): rows 2j and 2j+1 share a 128-byte line;
// chunk bits 3..4 are XORed with bits 6..7 = (row / 2) % 4:
//
//     r \ c | 0  1  2  3          row 2j sits in banks 0..15 and row 2j+1 in banks 16..31,
//       0   | 0  1  2  3          so the 8 rows of one chunk column land in 4 distinct
//       1   | 0  1  2  3          chunks x 2 halves = 8 distinct bank groups.
//       2   | 1  0  3  2
//       3   | 1  0  3  2
//       4   | 2  3  0  1
//       5   | 2  3  0  1
//       6   | 3  2  1  0
//       7   | 3  2  1  0
#pragma once

#include "flashbuf/core/config.hpp"

namespace flashbuf {

template <int Bits, int Base, int Shift>
struct Swizzle {
  static_assert(Bits >= 0 && Base >= 0, "Swizzle bit counts are non-negative");
  static_assert(Shift >= Bits,
                "Shift >= Bits keeps the source bits out of the destination bits, which "
                "makes the swizzle an involution (its own inverse)");
  static constexpr int kBits = Bits;
  static constexpr int kBase = Base;
  static constexpr int kShift = Shift;

  // Bits that receive the XOR, and the bits that are read.
  static constexpr int kDstMask = ((1 << Bits) - 1) << Base;
  static constexpr int kSrcMask = kDstMask << Shift;
  // The swizzle permutes [0, kDomain) and repeats with that period: it is a bijection on
  // every aligned block of kDomain offsets.
  static constexpr int kDomain = 1 << (Bits + Base + Shift);

  FLASHBUF_HOST_DEVICE static constexpr int apply(int offset) {
    return offset ^ ((offset & kSrcMask) >> Shift);
  }
  FLASHBUF_HOST_DEVICE constexpr int operator()(int offset) const { return apply(offset); }
};

using NoSwizzle = Swizzle<0, 0, 0>;

namespace detail {
inline constexpr int kSwizzleChunkBytes = 16;  // one bank group: 4 banks x 4 bytes

// The swizzle that XORs the 16-byte-chunk index of a row of `RowBytes` with the index of
// the row inside a `SpanBytes`-wide pattern: the TMA / wgmma swizzle modes, in elements.
// Bits  = log2(SpanBytes / 16) chunk bits permuted,
// Base  = log2(16 / ElemBytes) elements per chunk,
// Shift = log2(128 / 16) = 3: the source bits sit at byte bit 7, one 128-byte line up.
template <int SpanBytes, int ElemBytes>
struct SwizzleForSpan {
  static_assert(is_pow2(ElemBytes) && ElemBytes <= kSwizzleChunkBytes,
                "element size must be a power of two <= 16 bytes");
  using type = Swizzle<log2_pow2(SpanBytes / kSwizzleChunkBytes),
                       log2_pow2(kSwizzleChunkBytes / ElemBytes), 3>;
};
}  // namespace detail

// Swizzles for tiles whose rows are 128, 64 or 32 bytes (the TMA/wgmma swizzle modes of
// the same names). For bf16/fp16: Swizzle128B<2> = Swizzle<3,3,3> (64 columns),
// Swizzle64B<2> = Swizzle<2,3,3> (32 columns), Swizzle32B<2> = Swizzle<1,3,3> (16 columns).
template <int ElemBytes>
using Swizzle128B = typename detail::SwizzleForSpan<128, ElemBytes>::type;
template <int ElemBytes>
using Swizzle64B = typename detail::SwizzleForSpan<64, ElemBytes>::type;
template <int ElemBytes>
using Swizzle32B = typename detail::SwizzleForSpan<32, ElemBytes>::type;

}  // namespace flashbuf
