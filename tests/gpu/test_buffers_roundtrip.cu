// Bit-exact round trips of the buffers layer's data movement on the GPU: device memory ->
// shared tile (cp.async and register-staged fills, contiguous and paged sources) -> MMA
// fragments (ldmatrix, ldmatrix.trans), compared with the ownership maps of core/fragment.hpp.
#include <cuda_bf16.h>

#include <cstdint>
#include <random>
#include <vector>

#include "flashbuf/buffers/kv_buffer.cuh"
#include "flashbuf/buffers/kv_buffer_sm90.cuh"
#include "flashbuf/buffers/register_buffers.cuh"
#include "gpu_test_util.cuh"

namespace flashbuf {
namespace {

using TC = MmaSyncTensorCore<__nv_bfloat16>;         // K buffers: K-major B
using TCV = MmaSyncTensorCore<__nv_bfloat16, true>;  // V buffers: N-major B, read transposed
constexpr int kThreads = 128;

// Binds `buf` to rows of `src` (paged when pages != null) and fills its shared tile with rows
// [tile_row, tile_row + rows_valid), zeros after; then the tile is written out in row order.
template <class Buf, bool RegisterStaged>
__device__ void fill_and_read_back(Buf& buf, __nv_bfloat16* smem, const __nv_bfloat16* src, std::int64_t row_stride,
                                   const std::int32_t* pages, int page_size, int num_pages, int tile_row,
                                   int rows_valid, std::uint16_t* tile_out) {
  using Tile = typename Buf::Tile;
  buf.smem = smem;
  buf.src.base = src;
  buf.src.row_stride = row_stride;
  buf.src.pages = pages;
  buf.src.page_stride = std::int64_t(page_size) * row_stride;
  buf.src.page_div = FastDivmod(page_size);
  buf.src.num_pages = num_pages;
  buf.load_from_dram(tile_row, rows_valid);
  if constexpr (RegisterStaged) buf.template copy_to_shared<0>();
  sm80::cp_async_commit_group();
  sm80::cp_async_wait_group<0>();
  __syncthreads();
  for (int i = threadIdx.x; i < Tile::kRows * Tile::kCols; i += blockDim.x) {
    const int r = i / Tile::kCols, c = i % Tile::kCols;
    tile_out[i] = reinterpret_cast<const std::uint16_t*>(smem)[Tile::offset(r, c)];
  }
}

// The tile as above, then every warp reads all fragments of the tile (written out too).
template <class Buf, bool RegisterStaged>
__global__ void roundtrip_kernel(const __nv_bfloat16* src, std::int64_t row_stride,
                                 const std::int32_t* pages, int page_size, int num_pages,
                                 int tile_row, int rows_valid, std::uint16_t* tile_out,
                                 std::uint32_t* frag_out) {
  __shared__ __align__(128) __nv_bfloat16 smem[Buf::Tile::kElems];
  Buf buf;
  fill_and_read_back<Buf, RegisterStaged>(buf, smem, src, row_stride, pages, page_size, num_pages, tile_row,
                                          rows_valid, tile_out);
  // Fragments: [k-step][chunk][n-tile][2 regs] for lane threadIdx.x (warp 0 only).
  using Cfg = typename Buf::Config;
  constexpr int kChunks = Cfg::kCols / Cfg::kWarpTileN > 0 && Cfg::kIteratorAxis == IteratorAxis::keys
                              ? Cfg::kCols / Cfg::kWarpTileN : 1;
  if (threadIdx.x < 32) {
    int idx = 0;
    [&]<int... K>(std::integer_sequence<int, K...>) {
      ([&] {
        for (int chunk = 0; chunk < kChunks; ++chunk) {
          buf.template load_from_shared<K>(chunk);
          for (int nt = 0; nt < Buf::kNTiles; ++nt)
            for (int r = 0; r < 2; ++r) frag_out[(idx++) * 32 + threadIdx.x] = buf.mma_tile()[nt][r];
        }
      }(), ...);
    }(std::make_integer_sequence<int, Cfg::kMmaKSteps>{});
  }
}

// Rows of a K or V source on the host (16-bit patterns), and the same rows on the device:
// contiguous, or in shuffled pages of a pool (page p of the pool holds logical page perm[p]).
struct Source {
  std::vector<std::uint16_t> host;  // total_rows x cols, logical order
  DeviceBuffer<std::uint16_t> pool;
  DeviceBuffer<std::int32_t> pages;
  int num_pages = 0;
};
Source make_source(int total_rows, int cols, int page_size) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> bits16(0, 0x7f7f);
  std::vector<std::uint16_t> host(std::size_t(total_rows) * cols);
  for (auto& x : host) x = static_cast<std::uint16_t>(bits16(rng));
  std::vector<std::int32_t> pages;
  std::vector<std::uint16_t> pool = host;
  int num_pages = 0;
  if (page_size > 0) {
    num_pages = (total_rows + page_size - 1) / page_size;
    std::vector<std::int32_t> perm(num_pages);
    for (int i = 0; i < num_pages; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    pages = perm;
    pool.assign(std::size_t(num_pages) * page_size * cols, 0);
    for (int r = 0; r < total_rows; ++r)
      for (int c = 0; c < cols; ++c)
        pool[(std::size_t(perm[r / page_size]) * page_size + r % page_size) * cols + c] =
            host[std::size_t(r) * cols + c];
  }
  return Source{std::move(host), DeviceBuffer<std::uint16_t>(pool),
                DeviceBuffer<std::int32_t>(pages.empty() ? std::vector<std::int32_t>{0} : pages), num_pages};
}

template <class Buf, bool RegisterStaged>
void check_roundtrip(int page_size) {
  using Cfg = typename Buf::Config;
  constexpr int kRows = Cfg::kRows, kCols = Cfg::kCols;
  const int total_rows = 3 * kRows + 5;
  const int tile_row = kRows + 3;     // not tile aligned
  const int rows_valid = kRows - 7;   // a partial tile: the rest must be zero-filled
  const Source src = make_source(total_rows, kCols, page_size);
  const std::vector<std::uint16_t>& host = src.host;
  const int num_pages = src.num_pages;
  const auto& d_src = src.pool;
  const auto& d_pages = src.pages;
  DeviceBuffer<std::uint16_t> d_tile(kRows * kCols);
  constexpr int kChunks = Cfg::kIteratorAxis == IteratorAxis::keys ? Cfg::kCols / Cfg::kWarpTileN : 1;
  const int frag_regs = Cfg::kMmaKSteps * kChunks * Buf::kNTiles * 2;
  DeviceBuffer<std::uint32_t> d_frag(std::size_t(frag_regs) * 32);
  roundtrip_kernel<Buf, RegisterStaged><<<1, kThreads>>>(
      reinterpret_cast<const __nv_bfloat16*>(d_src.ptr), kCols, page_size > 0 ? d_pages.ptr : nullptr,
      page_size, num_pages, tile_row, rows_valid, d_tile.ptr, d_frag.ptr);
  CUDA_OK(cudaDeviceSynchronize());
  const auto tile = d_tile.download();
  auto expect = [&](int r, int c) -> std::uint16_t {
    return r < rows_valid ? host[std::size_t(tile_row + r) * kCols + c] : 0;
  };
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kCols; ++c)
      ASSERT_EQ(tile[r * kCols + c], expect(r, c)) << "tile row " << r << " col " << c;
  // Each fragment register holds two halves; check them against the B-operand map.
  const auto frag = d_frag.download();
  int idx = 0;
  for (int k = 0; k < Cfg::kMmaKSteps; ++k)
    for (int chunk = 0; chunk < kChunks; ++chunk)
      for (int nt = 0; nt < Buf::kNTiles; ++nt)
        for (int reg = 0; reg < 2; ++reg, ++idx)
          for (int lane = 0; lane < 32; ++lane)
            for (int half = 0; half < 2; ++half) {
              const RowCol kn = mma_m16n8k16::b_coord(lane, reg * 2 + half);  // (k, n)
              const int kk = k * 16 + kn.row;
              const int nn = Cfg::wtile_coord(chunk) + nt * 8 + kn.col;
              // K buffer: n = key (tile row), k = head dim. V buffer: k = key, n = depth.
              const bool keys_axis = Cfg::kIteratorAxis == IteratorAxis::keys;
              const std::uint16_t want = keys_axis ? expect(kk, nn) : expect(nn, kk);
              const std::uint16_t got = static_cast<std::uint16_t>(frag[idx * 32 + lane] >> (16 * half));
              ASSERT_EQ(got, want) << "k-step " << k << " chunk " << chunk << " n-tile " << nt
                                   << " lane " << lane << " element " << reg * 2 + half;
            }
}

// The Hopper KVBufferLDSSm90 gather (cp.async into a slab-major 128B-swizzled tile): the tile
// read back through SlabTile::offset must hold rows [tile_row, tile_row + rows_valid) and
// zeros after, for contiguous and paged sources. (Its wgmma descriptors are checked by
// WgmmaBuffers.)
template <class Buf>
__global__ void gather_sm90_kernel(const __nv_bfloat16* src, std::int64_t row_stride, const std::int32_t* pages,
                                   int page_size, int num_pages, int tile_row, int rows_valid,
                                   std::uint16_t* tile_out) {
  __shared__ __align__(1024) __nv_bfloat16 smem[Buf::Tile::kElems];
  Buf buf;
  fill_and_read_back<Buf, false>(buf, smem, src, row_stride, pages, page_size, num_pages, tile_row, rows_valid,
                                 tile_out);
}

template <class Buf>
void check_gather_sm90(int page_size) {
  constexpr int kRows = Buf::Config::kRows, kCols = Buf::Config::kCols;
  const int tile_row = kRows + 3, rows_valid = kRows - 7;
  const Source src = make_source(3 * kRows + 5, kCols, page_size);
  DeviceBuffer<std::uint16_t> d_tile(kRows * kCols);
  gather_sm90_kernel<Buf><<<1, 128>>>(reinterpret_cast<const __nv_bfloat16*>(src.pool.ptr), kCols,
                                      page_size > 0 ? src.pages.ptr : nullptr, page_size, src.num_pages, tile_row,
                                      rows_valid, d_tile.ptr);
  CUDA_OK(cudaDeviceSynchronize());
  const auto tile = d_tile.download();
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kCols; ++c)
      ASSERT_EQ(tile[r * kCols + c], r < rows_valid ? src.host[std::size_t(tile_row + r) * kCols + c] : 0)
          << "page size " << page_size << " tile row " << r << " col " << c;
}

// Each buffer with the wgmma description of the product it would feed (N = its key tile for K,
// its depth for V).
using In16 = __nv_bfloat16;
using KGather96 = KVBufferLDSSm90<KBufferConfig<128, 96, 128>, WgmmaTensorCore<In16, 128>, 128, 1>;
using KGather192 = KVBufferLDSSm90<KBufferConfig<64, 192, 64>, WgmmaTensorCore<In16, 64>, 128, 1>;
using VGather128 = KVBufferLDSSm90<VBufferConfig<128, 128, 128, 128>, WgmmaTensorCore<In16, 128, true>, 128, 1>;
using KGather80 = KVBufferLDSSm90<KBufferConfig<80, 256, 80>, WgmmaTensorCore<In16, 80>, 128, 1>;  // D 256's key tile
using VGather80 = KVBufferLDSSm90<VBufferConfig<80, 80, 256, 256>, WgmmaTensorCore<In16, 256, true>, 128, 1>;

TEST(BuffersRoundTrip, HopperGatherEveryShapeAndPageSize) {
  FLASHBUF_REQUIRE_GPU();
  for (int page : {0, 1, 3, 7, 100, 256}) {
    check_gather_sm90<KGather96>(page);
    check_gather_sm90<KGather192>(page);
    check_gather_sm90<VGather128>(page);
    check_gather_sm90<KGather80>(page);
    check_gather_sm90<VGather80>(page);
  }
}

using KLds128 = KBufferLDS<TC, 64, 64, 128, kThreads>;
using KLds96 = KBufferLDS<TC, 64, 64, 96, kThreads>;
using KReg64 = KBuffer<TC, 64, 64, 64, kThreads, 2>;
using VTrans128 = VBufferTransposeLoads<VBufferConfig<64, 64, 64, 128>, TCV, kThreads>;
using VTrans96 = VBufferTransposeLoads<VBufferConfig<64, 64, 32, 96>, TCV, kThreads>;
using VReg256 = VBuffer<TCV, 64, 64, 64, 256, kThreads, 1>;

TEST(BuffersRoundTrip, KBufferLdsContiguous) { FLASHBUF_REQUIRE_GPU(); check_roundtrip<KLds128, false>(0); }
TEST(BuffersRoundTrip, KBufferLdsHeadDim96) { FLASHBUF_REQUIRE_GPU(); check_roundtrip<KLds96, false>(0); }
TEST(BuffersRoundTrip, KBufferLdsPagedPage1) { FLASHBUF_REQUIRE_GPU(); check_roundtrip<KLds128, false>(1); }
TEST(BuffersRoundTrip, KBufferLdsPagedPage3) { FLASHBUF_REQUIRE_GPU(); check_roundtrip<KLds128, false>(3); }
TEST(BuffersRoundTrip, KBufferLdsPagedPage256) { FLASHBUF_REQUIRE_GPU(); check_roundtrip<KLds128, false>(256); }
TEST(BuffersRoundTrip, KBufferRegisterStaged) { FLASHBUF_REQUIRE_GPU(); check_roundtrip<KReg64, true>(0); }
TEST(BuffersRoundTrip, VBufferTransposeLoads) { FLASHBUF_REQUIRE_GPU(); check_roundtrip<VTrans128, false>(0); }
TEST(BuffersRoundTrip, VBufferTransposeLoadsDepth96Paged) { FLASHBUF_REQUIRE_GPU(); check_roundtrip<VTrans96, false>(16); }
TEST(BuffersRoundTrip, VBufferRegisterStagedDepth256) { FLASHBUF_REQUIRE_GPU(); check_roundtrip<VReg256, true>(0); }

}  // namespace
}  // namespace flashbuf
