// Host tests of core/swizzle.hpp and core/bank_conflicts.hpp: every swizzle is a bijection
// (and an involution), and the shared-memory accesses the buffers make are conflict-free
// with the swizzle while the unswizzled layout conflicts (so the test can tell).
#include <gtest/gtest.h>

#include <cstdint>
#include <type_traits>
#include <vector>

#include "flashbuf/buffers/smem_tile.cuh"
#include "flashbuf/core/bank_conflicts.hpp"
#include "flashbuf/core/fragment.hpp"
#include "flashbuf/core/swizzle.hpp"

namespace flashbuf {
namespace {

static_assert(std::is_same_v<Swizzle128B<2>, Swizzle<3, 3, 3>>);
static_assert(std::is_same_v<Swizzle64B<2>, Swizzle<2, 3, 3>>);
static_assert(std::is_same_v<Swizzle32B<2>, Swizzle<1, 3, 3>>);
static_assert(std::is_same_v<Swizzle128B<4>, Swizzle<3, 2, 3>>);
static_assert(std::is_same_v<Swizzle128B<1>, Swizzle<3, 4, 3>>);
static_assert(Swizzle<3, 3, 3>::apply(64) == 72);  // row 1, chunk 0 -> chunk 1

template <class Swz>
void expect_bijective_involution() {
  SCOPED_TRACE(testing::Message() << "Swizzle<" << Swz::kBits << "," << Swz::kBase << ","
                                  << Swz::kShift << ">");
  constexpr int kPeriods = 3;  // also check it repeats on later aligned blocks
  std::vector<int> hits(Swz::kDomain * kPeriods, 0);
  for (int x = 0; x < Swz::kDomain * kPeriods; ++x) {
    const int y = Swz::apply(x);
    ASSERT_EQ(y / Swz::kDomain, x / Swz::kDomain) << "stays in its aligned block";
    ASSERT_EQ(Swz::apply(y), x) << "involution";
    ++hits[y];
  }
  for (int h : hits) EXPECT_EQ(h, 1);
}

TEST(CoreSwizzle, EverySwizzleIsABijection) {
  expect_bijective_involution<NoSwizzle>();
  expect_bijective_involution<Swizzle<1, 3, 3>>();
  expect_bijective_involution<Swizzle<2, 3, 3>>();
  expect_bijective_involution<Swizzle<3, 3, 3>>();
  expect_bijective_involution<Swizzle<3, 2, 3>>();
  expect_bijective_involution<Swizzle<3, 4, 3>>();
  expect_bijective_involution<Swizzle<2, 4, 4>>();
  expect_bijective_involution<Swizzle<3, 3, 4>>();
  for (int x = 0; x < 1024; ++x) EXPECT_EQ(NoSwizzle::apply(x), x);
}

TEST(CoreSwizzle, TheDrawnTableHolds) {
  // swizzle.hpp's table: physical chunk = chunk ^ (row % 8) for a 64-column bf16 tile.
  constexpr int kCols = 64, kChunkElems = 8;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < kCols; ++c) {
      const int physical = Swizzle<3, 3, 3>::apply(r * kCols + c);
      EXPECT_EQ(physical / kCols, r);
      EXPECT_EQ((physical % kCols) / kChunkElems, (c / kChunkElems) ^ (r % 8));
      EXPECT_EQ(physical % kChunkElems, c % kChunkElems);
    }
}

TEST(CoreSwizzle, BankModel) {
  std::uint32_t same[32] = {};  // all lanes read one word: broadcast
  EXPECT_EQ(bank_conflict_degree(same, 32, 4), 1);
  std::uint32_t column[32];
  for (int i = 0; i < 32; ++i) column[i] = 128u * i;  // one column of a 32-float-wide tile
  EXPECT_EQ(bank_conflict_degree(column, 32, 4), 32);
  std::uint32_t rows[32];
  for (int i = 0; i < 32; ++i) rows[i] = 16u * i;  // contiguous 16-byte vectors
  EXPECT_EQ(bank_conflict_degree(rows, 32, 16), 1);
  std::uint32_t pairs[32];
  for (int i = 0; i < 32; ++i) pairs[i] = 8u * (i / 2) + (i % 2 ? 256u : 0u);  // 2 words per bank
  EXPECT_EQ(bank_conflict_degree(pairs, 32, 8), 2);
  EXPECT_EQ(smem_lanes_per_phase(16), 8);
  EXPECT_EQ(smem_lanes_per_phase(8), 16);
  EXPECT_EQ(smem_lanes_per_phase(4), 32);
}

constexpr int kBf16Bytes = 2;
constexpr int kVecBytes = 16;  // cp.async / st.shared.v4 / one ldmatrix row
constexpr int kVecElems = kVecBytes / kBf16Bytes;

// Byte offset of bf16 element (r, c) in a tile of `cols` columns stored as column blocks
// ("atoms") of `atom_cols` columns, each atom row-major and swizzled by `Swz`.
template <class Swz>
std::uint32_t tile_byte_offset(int rows, int atom_cols, int r, int c) {
  const int atom = c / atom_cols;
  const int in_atom = Swz::apply(r * atom_cols + c % atom_cols);
  return static_cast<std::uint32_t>((atom * rows * atom_cols + in_atom) * kBf16Bytes);
}

// Worst conflict degree of the two access patterns the K/V buffers make on a rows x cols
// bf16 tile, over the whole tile:
//  - writes: thread t of a warp stores the 16-byte vector t % vecs_per_row of row
//    t / vecs_per_row (cp.async / st.shared.v4 after a coalesced global read);
//  - ldmatrix.x4 reads of 16x16 blocks (lane l: row (l % 16), column 8 * (l / 16)).
template <class Swz>
int worst_write_degree(int rows, int cols, int atom_cols) {
  const int vecs_per_row = cols / kVecElems;
  const int vecs = rows * vecs_per_row;
  int worst = 0;
  for (int first = 0; first < vecs; first += kWarpSize) {
    std::uint32_t addr[kWarpSize];
    for (int t = 0; t < kWarpSize; ++t) {
      const int v = first + t;
      addr[t] = tile_byte_offset<Swz>(rows, atom_cols, v / vecs_per_row,
                                      (v % vecs_per_row) * kVecElems);
    }
    const int degree = bank_conflict_degree(addr, kWarpSize, kVecBytes);
    worst = degree > worst ? degree : worst;
  }
  return worst;
}

template <class Swz>
int worst_ldmatrix_degree(int rows, int cols, int atom_cols) {
  int worst = 0;
  for (int r0 = 0; r0 < rows; r0 += 16)
    for (int c0 = 0; c0 < cols; c0 += 16) {
      std::uint32_t addr[kWarpSize];
      for (int lane = 0; lane < kWarpSize; ++lane) {
        const RowCol a = ldmatrix_x4::a_tile_row_address(lane);
        addr[lane] = tile_byte_offset<Swz>(rows, atom_cols, r0 + a.row, c0 + a.col);
      }
      const int degree = bank_conflict_degree(addr, kWarpSize, kVecBytes);
      worst = degree > worst ? degree : worst;
    }
  return worst;
}

TEST(CoreSwizzle, Swizzle128BIsConflictFreeFor64ColumnTiles) {
  constexpr int kRows = 64, kCols = 64;  // 128-byte rows
  EXPECT_EQ(worst_write_degree<Swizzle128B<kBf16Bytes>>(kRows, kCols, kCols), 1);
  EXPECT_EQ(worst_ldmatrix_degree<Swizzle128B<kBf16Bytes>>(kRows, kCols, kCols), 1);
  // Without the swizzle, the 8 rows an ldmatrix phase reads share one bank group.
  EXPECT_EQ(worst_ldmatrix_degree<NoSwizzle>(kRows, kCols, kCols), 8);
  EXPECT_EQ(worst_write_degree<NoSwizzle>(kRows, kCols, kCols), 1);  // writes were fine
}

TEST(CoreSwizzle, Swizzle64BIsConflictFreeFor32ColumnTiles) {
  constexpr int kRows = 64, kCols = 32;  // 64-byte rows: two rows per 128-byte line
  EXPECT_EQ(worst_write_degree<Swizzle64B<kBf16Bytes>>(kRows, kCols, kCols), 1);
  EXPECT_EQ(worst_ldmatrix_degree<Swizzle64B<kBf16Bytes>>(kRows, kCols, kCols), 1);
  EXPECT_EQ(worst_ldmatrix_degree<NoSwizzle>(kRows, kCols, kCols), 4);
}

TEST(CoreSwizzle, TwoSwizzled128BAtomsAreConflictFreeFor128ColumnTiles) {
  constexpr int kRows = 64, kCols = 128, kAtomCols = 64;  // 256-byte rows as 2 atoms
  EXPECT_EQ(worst_write_degree<Swizzle128B<kBf16Bytes>>(kRows, kCols, kAtomCols), 1);
  EXPECT_EQ(worst_ldmatrix_degree<Swizzle128B<kBf16Bytes>>(kRows, kCols, kAtomCols), 1);
  EXPECT_EQ(worst_ldmatrix_degree<NoSwizzle>(kRows, kCols, kAtomCols), 8);
  // Odd row counts too (the atoms still start 128-byte aligned since rows*128 bytes).
  EXPECT_EQ(worst_ldmatrix_degree<Swizzle128B<kBf16Bytes>>(48, kCols, kAtomCols), 1);
}

// LineCopies (buffers/smem_tile.cuh): every chunk of the tile is copied exactly once, and each
// thread's chunk (pass, line) lands where SwizzledTile::offset puts its (row, column).
template <int Rows, int Cols, int Threads>
void check_line_copies() {
  using Tile = SwizzledTile<Rows, Cols>;
  using Lines = LineCopies<Tile, Threads>;
  ASSERT_TRUE(Lines::kApplies) << Rows << "x" << Cols;
  std::vector<int> hits(Rows * Tile::kChunksPerRow, 0);
  for (int t = 0; t < Threads; ++t) {
    const int row0 = Lines::first_row(t), col0 = Lines::first_col(t);
    for (int pass = 0; pass < Lines::kPasses; ++pass)
      for (int line = 0; line < Lines::kLines; ++line) {
        const int row = row0 + pass * Lines::kRowsPerPass, col = col0 + Lines::col_step(line);
        ASSERT_LT(row, Rows);
        ASSERT_LT(col, Cols);
        EXPECT_EQ(Tile::offset(row0, col0) + Lines::offset_step(pass, line), Tile::offset(row, col))
            << Rows << "x" << Cols << " thread " << t << " pass " << pass << " line " << line;
        ++hits[row * Tile::kChunksPerRow + col / Tile::kChunkElems];
      }
  }
  for (int h : hits) EXPECT_EQ(h, 1);
}

TEST(CoreSwizzle, LineCopiesCoverTheTileOnceAtTheSwizzledOffsets) {
  check_line_copies<64, 64, 128>();
  check_line_copies<128, 64, 128>();
  check_line_copies<64, 128, 128>();
  check_line_copies<128, 128, 128>();
  check_line_copies<64, 256, 128>();
  check_line_copies<64, 256, 256>();
  check_line_copies<64, 192, 128>();
  // Rows of 96 columns are not whole lines (the pitch is padded to 128): the per-chunk path.
  static_assert(!LineCopies<SwizzledTile<64, 96>, 128>::kApplies);
}

}  // namespace
}  // namespace flashbuf
