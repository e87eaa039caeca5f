// Host tests of core/tile_rows.hpp: both assignments of a tile's rows to a block's threads copy
// every chunk of the tile once, and the consecutive form's per-pass offsets are the swizzled
// layout's, for the decode ring's shapes (D 64 / 128 / 256 and the 8-warp block).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "flashbuf/core/tile_rows.hpp"

namespace {

using flashbuf::swizzled_chunk_offset;

template <int RowBytes, int RowsPerPass, int Passes>
void check_shape() {
  using Rows = flashbuf::TileRows<RowBytes, RowsPerPass, Passes>;
  constexpr int kChunks = RowBytes / 16;
  std::vector<int> strided(Rows::kRows * kChunks, 0), consecutive(Rows::kRows * kChunks, 0);
  for (int row = 0; row < RowsPerPass; ++row)
    for (int chunk = 0; chunk < kChunks; ++chunk) {
      const int base = Rows::consecutive_base(row), chunk0 = Rows::consecutive_chunk(row, chunk);
      for (int i = 0; i < Passes; ++i) {
        const int r = Rows::consecutive_row(row, i);
        ASSERT_EQ(Rows::consecutive_offset(base, chunk0, i), swizzled_chunk_offset(r, chunk, RowBytes))
            << "row " << row << " chunk " << chunk << " pass " << i;
        ++consecutive[r * kChunks + chunk];
        ++strided[Rows::strided_row(row, i) * kChunks + chunk];
      }
    }
  for (int n : strided) EXPECT_EQ(n, 1);
  for (int n : consecutive) EXPECT_EQ(n, 1);
  // The swizzled offsets of the tile are a permutation of its chunks.
  std::vector<int> seen(Rows::kRows * kChunks, 0);
  for (int r = 0; r < Rows::kRows; ++r)
    for (int c = 0; c < kChunks; ++c) ++seen[swizzled_chunk_offset(r, c, RowBytes) / 16];
  for (int n : seen) EXPECT_EQ(n, 1);
}

TEST(CoreTileRows, EveryChunkOnceAndTheSwizzledOffsets) {
  check_shape<256, 8, 8>();    // D 128, 4 warps: 8 rows a pass, 64-key tile
  check_shape<256, 16, 4>();   // D 128, 8 warps
  check_shape<128, 16, 4>();   // D 64
  check_shape<512, 4, 16>();   // D 256
  check_shape<256, 8, 2>();    // a run of 2: row * Passes leaves one low bit for i
  check_shape<128, 8, 1>();    // one pass: both forms are the row itself
}

TEST(CoreTileRows, ARunOfConsecutiveRowsIsOneRunOfKeys) {
  using Rows = flashbuf::TileRows<256, 8, 8>;
  for (int row = 0; row < 8; ++row)
    for (int i = 1; i < 8; ++i) EXPECT_EQ(Rows::consecutive_row(row, i), Rows::consecutive_row(row, 0) + i);
  EXPECT_EQ(Rows::strided_row(3, 2), 19) << "strided: rows 3, 11, 19, ...";
}

// Against the division of every row: each row of a run before the keys' end lies in the run's
// page at the run's row plus its index; every run addresses rows inside one page whose entry
// the tile fetched (the pages of the tile's keys before hi); for page sizes that are multiples
// of the run, tiles from any multiple of the run, and every end.
template <int Passes>
void check_runs(int block_n) {
  using Rows = flashbuf::TileRows<256, 8, Passes>;
  for (int page : {Passes, 2 * Passes, 3 * Passes, 16, 48, 64, 256}) {
    if (page % Passes) continue;
    const flashbuf::FastDivmod div(page);
    for (int t0 = 0; t0 <= 3 * page + block_n; t0 += Passes)
      for (int hi = t0 + 1; hi <= t0 + block_n + 1; ++hi) {
        const int first = t0 / page, last = (std::min(t0 + block_n, hi) - 1) / page;  // fetched entries
        for (int r0 = t0; r0 < t0 + block_n; r0 += Passes) {
          const auto run = Rows::run_in_page(r0, hi, div);
          ASSERT_GE(run.page_in_seq, first);
          ASSERT_LE(run.page_in_seq, last) << "page " << page << " t0 " << t0 << " hi " << hi << " r0 " << r0;
          ASSERT_GE(run.in_page, 0);
          ASSERT_LE(run.in_page + Passes, page) << "the run stays in its page";
          for (int i = 0; i < Passes && r0 + i < hi; ++i) {
            ASSERT_EQ(run.page_in_seq, (r0 + i) / page);
            ASSERT_EQ(run.in_page + i, (r0 + i) % page);
          }
        }
      }
  }
}

TEST(CoreTileRows, ARunLiesInOneFetchedPage) {
  check_runs<4>(64);
  check_runs<8>(64);
  check_runs<16>(64);
}

}  // namespace
