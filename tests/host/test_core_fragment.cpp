// Host tests of core/fragment.hpp: each (lane, element) map covers its tile exactly once,
// the maps agree with one another where the kernels rely on it (C -> A for P.V, ldmatrix
// -> mma, wgmma -> mma), and spot values from the PTX ISA figures.
#include <gtest/gtest.h>

#include <vector>

#include "flashbuf/core/fragment.hpp"

namespace flashbuf {
namespace {

static_assert(mma_m16n8k16::a_coord(0, 0) == RowCol{0, 0});
static_assert(mma_m16n8k16::a_coord(5, 1) == RowCol{1, 3});

// Calls coord(owner, elem) for every owner/elem and checks each cell of rows x cols is
// produced exactly once.
template <class CoordFn>
void expect_bijection(int owners, int elems, int rows, int cols, CoordFn coord) {
  std::vector<int> hits(rows * cols, 0);
  for (int owner = 0; owner < owners; ++owner)
    for (int e = 0; e < elems; ++e) {
      const RowCol rc = coord(owner, e);
      ASSERT_GE(rc.row, 0);
      ASSERT_LT(rc.row, rows);
      ASSERT_GE(rc.col, 0);
      ASSERT_LT(rc.col, cols);
      ++hits[rc.row * cols + rc.col];
    }
  for (int i = 0; i < rows * cols; ++i) EXPECT_EQ(hits[i], 1) << "cell " << i / cols << "," << i % cols;
}

TEST(CoreFragment, MmaMapsAreBijections) {
  using namespace mma_m16n8k16;
  expect_bijection(kWarpSize, kAElemsPerLane, kM, kK, a_coord);
  expect_bijection(kWarpSize, kBElemsPerLane, kK, kN, b_coord);
  expect_bijection(kWarpSize, kCElemsPerLane, kM, kN, c_coord);
}

TEST(CoreFragment, MmaSpotValuesFromThePtxFigures) {
  using namespace mma_m16n8k16;
  // Lane 0 holds A (0,0) (0,1) (8,0) (8,1) (0,8) (0,9) (8,8) (8,9).
  const RowCol lane0[8] = {{0, 0}, {0, 1}, {8, 0}, {8, 1}, {0, 8}, {0, 9}, {8, 8}, {8, 9}};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(a_coord(0, i), lane0[i]) << i;
  // Lane 31: group 7, quad 3.
  EXPECT_EQ(a_coord(31, 7), (RowCol{15, 15}));
  EXPECT_EQ(b_coord(31, 0), (RowCol{6, 7}));
  EXPECT_EQ(b_coord(31, 3), (RowCol{15, 7}));
  EXPECT_EQ(c_coord(31, 3), (RowCol{15, 7}));
  EXPECT_EQ(c_coord(6, 2), (RowCol{9, 4}));
}

// The reason S accumulators become P without any shuffle: two adjacent n8 C tiles (keys
// 0..7 and 8..15 of a 16-key slice) put each value where the A operand of P.V wants it,
// with A element i = C tile i/4, element i%4.
TEST(CoreFragment, TwoAccumulatorTilesAreOneAFragment) {
  using namespace mma_m16n8k16;
  for (int lane = 0; lane < kWarpSize; ++lane)
    for (int i = 0; i < kAElemsPerLane; ++i) {
      const int n_tile = i / kCElemsPerLane;
      const RowCol c = c_coord(lane, i % kCElemsPerLane);
      EXPECT_EQ(a_coord(lane, i), (RowCol{c.row, c.col + kN * n_tile})) << lane << "," << i;
    }
}

TEST(CoreFragment, LdmatrixX4AddressesEachRowOnce) {
  using namespace ldmatrix_x4;
  std::vector<int> hits(kMatrices * kMatrixRows, 0);
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const MatrixRowCol src = address_coord(lane);
    ++hits[src.matrix * kMatrixRows + src.row];
  }
  for (int h : hits) EXPECT_EQ(h, 1);
  // Every lane receives 8 elements, all (matrix, row, col) covered once.
  std::vector<int> received(kMatrices * kMatrixRows * kMatrixRows, 0);
  for (int lane = 0; lane < kWarpSize; ++lane)
    for (int i = 0; i < kElemsPerLane; ++i) {
      const MatrixRowCol d = dest_coord(lane, i);
      ++received[(d.matrix * kMatrixRows + d.row) * kMatrixRows + d.col];
    }
  for (int h : received) EXPECT_EQ(h, 1);
}

// ldmatrix.x4 of a 16x16 A tile, with lanes pointing at a_tile_row_address(lane), delivers
// exactly the mma A fragment.
TEST(CoreFragment, LdmatrixX4LoadsTheAFragment) {
  expect_bijection(kWarpSize, 1, mma_m16n8k16::kM, 2, [](int lane, int) {
    const RowCol a = ldmatrix_x4::a_tile_row_address(lane);
    return RowCol{a.row, a.col / ldmatrix_x4::kMatrixRows};  // (row, which 8-col half)
  });
  for (int lane = 0; lane < kWarpSize; ++lane)
    for (int i = 0; i < ldmatrix_x4::kElemsPerLane; ++i) {
      const auto d = ldmatrix_x4::dest_coord(lane, i);
      const RowCol origin = ldmatrix_x4::a_tile_matrix_origin(d.matrix);
      EXPECT_EQ((RowCol{origin.row + d.row, origin.col + d.col}),
                mma_m16n8k16::a_coord(lane, i))
          << lane << "," << i;
    }
}

// ldmatrix.x4 (no .trans) of a 16(n) x 16(k) slice of K stored keys x head-dim delivers the
// B fragments of two n8 MMAs: registers 0,1 for keys 0..7, registers 2,3 for keys 8..15.
TEST(CoreFragment, LdmatrixX4LoadsTwoBFragmentsFromNkStorage) {
  using mma_m16n8k16::kBElemsPerLane;
  expect_bijection(kWarpSize, 1, 16, 2, [](int lane, int) {
    const RowCol a = ldmatrix_x4::b_tile_row_address_nk(lane);
    return RowCol{a.row, a.col / ldmatrix_x4::kMatrixRows};
  });
  for (int lane = 0; lane < kWarpSize; ++lane)
    for (int i = 0; i < ldmatrix_x4::kElemsPerLane; ++i) {
      const auto d = ldmatrix_x4::dest_coord(lane, i);
      const RowCol origin = ldmatrix_x4::b_tile_matrix_origin_nk(d.matrix);
      const RowCol nk{origin.row + d.row, origin.col + d.col};
      const int n_tile = i / kBElemsPerLane;
      const RowCol kn = mma_m16n8k16::b_coord(lane, i % kBElemsPerLane);
      EXPECT_EQ(nk, (RowCol{kn.col + mma_m16n8k16::kN * n_tile, kn.row})) << lane << "," << i;
    }
}

TEST(CoreFragment, WgmmaAccumulatorMap) {
  using namespace wgmma_m64nNk16;
  for (int n = 8; n <= 256; n += 8) {
    SCOPED_TRACE(n);
    expect_bijection(kThreads, acc_regs(n), kM, n, acc_coord);
    for (int t = 0; t < kThreads; ++t)
      for (int r = 0; r < acc_regs(n); ++r) {
        const int warp = t / kWarpSize, lane = t % kWarpSize;
        // The PTX ISA formula ...
        const RowCol formula{16 * warp + lane / 4 + 8 * ((r / 2) % 2),
                             8 * (r / 4) + 2 * (lane % 4) + r % 2};
        ASSERT_EQ(acc_coord(t, r), formula);
        // ... is the mma C pattern per warp slab and 8-column block.
        const RowCol c = mma_m16n8k16::c_coord(lane, r % 4);
        ASSERT_EQ(acc_coord(t, r), (RowCol{16 * warp + c.row, 8 * (r / 4) + c.col}));
      }
  }
}

}  // namespace
}  // namespace flashbuf
