// The Hopper buffers in isolation, so a layout or descriptor mistake shows here rather than
// as a wrong attention output: one warpgroup computes S = Q K^T (A and B from shared memory,
// K-major) and O = P V (A from registers, V N-major through the transpose bit) with the
// sm90 buffer types, against a host product of the same bf16 values.
#include <cuda_bf16.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "flashbuf/buffers/kv_buffer_sm90.cuh"
#include "flashbuf/buffers/register_buffers.cuh"
#include "flashbuf/kernels/prefill_common.cuh"
#include "gpu_test_util.cuh"

namespace flashbuf {
namespace {

using In = __nv_bfloat16;
constexpr int kM = 64, kD = 128;  // rows, head dim (= depth of V); kN keys: the kernels' tiles
template <int kN>
using WGS = WgmmaTensorCore<In, kN>;   // S = Q K^T: K-major B
using WGO = WgmmaTensorCore<In, kD, true>;  // O = P V: N-major B

template <int kN>
using QBufN = QSharedBufferSm90<WGS<kN>, kM, kD>;
template <int kN>
using KBufN = KVBufferLDSSm90<KBufferConfig<kN, kD, kN>, WGS<kN>, 128, 1>;
template <int kN>
using VBufN = KVBufferLDSSm90<VBufferConfig<kN, kN, kD, kD>, WGO, 128, 1>;

// s_out: S (kM x kN, fp32); o_out: P V with P = bf16(S / 64) (kM x kD, fp32).
template <int kN>
__global__ void wgmma_buffers_kernel(const In* q, const In* k, const In* v, float* s_out, float* o_out) {
#ifndef FLASHBUF_NO_WGMMA
  using KBuf = KBufN<kN>;
  using VBuf = VBufN<kN>;
  extern __shared__ __align__(1024) char smem_raw[];
  char* smem = reinterpret_cast<char*>(round_up(reinterpret_cast<std::uintptr_t>(smem_raw), std::uintptr_t(1024)));
  In* sq = reinterpret_cast<In*>(smem);
  KBuf kbuf;
  VBuf vbuf;
  kbuf.smem = reinterpret_cast<In*>(smem + QBufN<kN>::Tile::kBytes);
  vbuf.smem = reinterpret_cast<In*>(smem + QBufN<kN>::Tile::kBytes + KBuf::kSmemBytes);
  kbuf.src.base = k;
  kbuf.src.row_stride = kD;
  vbuf.src.base = v;
  vbuf.src.row_stride = kD;
  load_tile_async<typename QBufN<kN>::Tile, 128>(sq, q, kD, kM);
  kbuf.load_from_dram(0, kN);
  vbuf.load_from_dram(0, kN);
  sm80::cp_async_commit_group();
  sm80::cp_async_wait_group<0>();
  sm90::fence_proxy_async_shared();
  __syncthreads();
  QBufN<kN> qbuf;
  qbuf.smem = sq;
  PRegisterBuffer<WGS<kN>, 1, kN> p;
  float(&s)[kN / 2] = reinterpret_cast<float(&)[kN / 2]>(p.s);
  sm90::wgmma_fence();
  static_for<kD / 16>([&](auto kc) {
    constexpr int kk = decltype(kc)::value;
    kbuf.template load_from_shared<kk>(0);
    WGS<kN>::mma_ss(s, qbuf.template mma_tile<kk>(), kbuf.mma_tile(), kk > 0);
  });
  sm90::wgmma_commit_group();
  sm90::wgmma_wait_group<0>();
  sm90::fence_registers(s);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int r = 0; r < kN / 2; ++r) {
    const RowCol rc = wgmma_m64nNk16::acc_coord(threadIdx.x, r);
    s_out[rc.row * kN + rc.col] = s[r];
  }
  for (auto& x : s) x *= 1.0f / 64;
  OutputRegisterBuffer<WGO, 1, kD> out;
  out.zero();
  float(&o)[kD / 2] = reinterpret_cast<float(&)[kD / 2]>(out.o);
  std::uint32_t a[kN / 16][4];
  static_for<kN / 16>([&](auto kc) { p.template mma_tile<decltype(kc)::value>(0, a[decltype(kc)::value]); });
  sm90::wgmma_fence();
  static_for<kN / 16>([&](auto kc) {
    constexpr int kk = decltype(kc)::value;
    vbuf.template load_from_shared<kk>(0);
    WGO::mma_rs(o, a[kk], vbuf.mma_tile(), true);
  });
  sm90::wgmma_commit_group();
  sm90::wgmma_wait_group<0>();
  sm90::fence_registers(o);
  for (int r = 0; r < kD / 2; ++r) {
    const RowCol rc = wgmma_m64nNk16::acc_coord(threadIdx.x, r);
    o_out[rc.row * kD + rc.col] = o[r];
  }
  (void)warp;
  (void)lane;
#endif
}

float bf16_round(float x) { return __bfloat162float(__float2bfloat16(x)); }

template <int kN>
void check_wgmma_buffers() {
  SCOPED_TRACE("keys per tile " + std::to_string(kN));
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> normal;
  std::vector<In> q(kM * kD), k(kN * kD), v(kN * kD);
  std::vector<float> qf(q.size()), kf(k.size()), vf(v.size());
  auto fill = [&](std::vector<In>& h, std::vector<float>& f) {
    for (std::size_t i = 0; i < h.size(); ++i) {
      h[i] = __float2bfloat16(normal(rng));
      f[i] = __bfloat162float(h[i]);
    }
  };
  fill(q, qf);
  fill(k, kf);
  fill(v, vf);
  DeviceBuffer<In> dq(q), dk(k), dv(v);
  DeviceBuffer<float> ds(kM * kN), dout(kM * kD);
  const int smem = 1024 + QBufN<kN>::Tile::kBytes + KBufN<kN>::kSmemBytes + VBufN<kN>::kSmemBytes;
  CUDA_OK(cudaFuncSetAttribute(wgmma_buffers_kernel<kN>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  wgmma_buffers_kernel<kN><<<1, 128, smem>>>(dq.ptr, dk.ptr, dv.ptr, ds.ptr, dout.ptr);
  CUDA_OK(cudaDeviceSynchronize());
  const auto s = ds.download();
  const auto o = dout.download();
  std::vector<float> p(kM * kN);
  for (int i = 0; i < kM; ++i)
    for (int j = 0; j < kN; ++j) {
      double acc = 0;
      for (int c = 0; c < kD; ++c) acc += double(qf[i * kD + c]) * kf[j * kD + c];
      ASSERT_NEAR(s[i * kN + j], acc, 1e-3 * (1 + std::fabs(acc))) << "S row " << i << " key " << j;
      p[i * kN + j] = bf16_round(s[i * kN + j] / 64);
    }
  for (int i = 0; i < kM; ++i)
    for (int c = 0; c < kD; ++c) {
      double acc = 0;
      for (int j = 0; j < kN; ++j) acc += double(p[i * kN + j]) * vf[j * kD + c];
      ASSERT_NEAR(o[i * kD + c], acc, 1e-3 * (1 + std::fabs(acc))) << "O row " << i << " col " << c;
    }
}

// The Hopper prefill kernel's key tiles: 128 up to D 128; above, 80 for a block per item and 64
// on the persistent grid (here at D 128: the same S and P V descriptor arithmetic).
TEST(WgmmaBuffers, QKtAndPVMatchHostProducts) {
  FLASHBUF_REQUIRE_GPU();
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major != 9 || prop.minor != 0) GTEST_SKIP() << "wgmma needs compute capability 9.0";
  check_wgmma_buffers<128>();
  check_wgmma_buffers<80>();
  check_wgmma_buffers<64>();
}

}  // namespace
}  // namespace flashbuf
