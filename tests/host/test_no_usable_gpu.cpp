// Host tests: on a machine without a usable GPU (CI: nvcc, no driver; or a build with CUDA
// switched off) every entry point given CUDA tensors says that there is no usable GPU, or
// that the build has no CUDA and why, instead of a raw CUDA runtime error. Skipped where a
// GPU is present.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "flashbuf/flashbuf.hpp"

namespace {

using namespace flashbuf;

// What the message must say on this build: a CUDA build names the missing GPU, a build
// without CUDA the reason it has none.
void expect_no_gpu_message(const std::function<void()>& call) {
  try {
    call();
    FAIL() << "expected a RuntimeError for CUDA tensors without a usable GPU";
  } catch (const RuntimeError& e) {
    const std::string what = e.what();
#if defined(FLASHBUF_WITH_CUDA)
    EXPECT_NE(what.find("no usable CUDA GPU"), std::string::npos) << what;
#else
    EXPECT_NE(what.find("built without CUDA ("), std::string::npos) << what;
    EXPECT_EQ(what.find("no nvcc at configure time"), std::string::npos) << what;
#endif
    EXPECT_NE(what.rfind("CUDA error in", 0), 0u) << "a raw CUDA error: " << what;
  }
}

class NoUsableGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_available()) GTEST_SKIP() << "a usable CUDA GPU is present";
  }
  // Host memory only stands in for device pointers: nothing may read it before the check.
  std::vector<std::uint16_t> storage_ = std::vector<std::uint16_t>(4 * 64 * 4, 0);
  void* data() { return storage_.data(); }
};

TEST_F(NoUsableGpu, AttentionOnCudaTensorsSaysSo) {
  AttentionArgs a;
  a.q = make_view(data(), DType::bf16, {1, 4, 1, 64}, DeviceKind::cuda);
  a.k = a.v = a.o = a.q;
  expect_no_gpu_message([&] { attention(a); });
}

TEST_F(NoUsableGpu, DecodePlanForACudaDeviceSaysSo) {
  DecodeProblem p;
  p.batch = 1;
  p.heads_q = p.heads_kv = 1;
  p.head_dim = p.head_dim_v = 128;
  p.max_seqlen_k = 64;
  p.device = DeviceKind::cuda;
  expect_no_gpu_message([&] { plan_decode(p); });
}

TEST_F(NoUsableGpu, MergeStatesOnCudaTensorsSaysSo) {
  std::vector<float> lse(2 * 4, 0.0f);
  MergeStatesArgs m;
  m.o_parts = make_view(data(), DType::bf16, {2, 4, 1, 64}, DeviceKind::cuda);
  m.lse_parts = make_view(lse.data(), DType::fp32, {2, 4, 1}, DeviceKind::cuda);
  // o after o_parts in the storage: an output overlapping an input is refused before the GPU is asked.
  m.o = make_view(storage_.data() + 2 * 4 * 64, DType::bf16, {4, 1, 64}, DeviceKind::cuda);
  expect_no_gpu_message([&] { merge_states(m); });
}

// The output-shape checks the bindings call before allocating say it first too, before a
// message that only matters on a GPU: fp32 inputs (CPU only) or a head dim no kernel has.
TEST_F(NoUsableGpu, OutputShapeChecksSaySoBeforeGpuOnlyMessages) {
  std::vector<float> fp32(4 * 64 * 4, 0.0f);
  AttentionArgs a;
  a.q = make_view(fp32.data(), DType::fp32, {1, 4, 1, 64}, DeviceKind::cuda);
  a.k = a.v = a.q;
  expect_no_gpu_message([&] { attention_output_shapes(a); });
  expect_no_gpu_message([&] { attention(a); });
  a.q = a.k = a.v = make_view(data(), DType::bf16, {1, 4, 1, 80}, DeviceKind::cuda);  // D 80: never built
  expect_no_gpu_message([&] { attention_output_shapes(a); });
  // Metadata only (torch.compile's fake tensors): the checks without the device's answer.
  EXPECT_THROW(attention_output_shapes(a, CheckScope::metadata), ArgumentError);
  std::vector<float> lse(2 * 4, 0.0f);
  MergeStatesArgs m;
  m.o_parts = make_view(fp32.data(), DType::fp32, {2, 4, 1, 64}, DeviceKind::cuda);
  m.lse_parts = make_view(lse.data(), DType::fp32, {2, 4, 1}, DeviceKind::cuda);
  expect_no_gpu_message([&] { merge_output_shapes(m); });
}

TEST_F(NoUsableGpu, DeviceInfoSaysSo) {
  expect_no_gpu_message([] { cuda_device_info(0); });
}

TEST(BuildInfo, SaysWhyCudaIsAbsent) {
  const std::string info = build_info();
  EXPECT_NE(info.find(std::string("flashbuf ") + FLASHBUF_VERSION_STRING), std::string::npos) << info;
#if defined(FLASHBUF_WITH_CUDA)
  EXPECT_NE(info.find("CUDA architectures: "), std::string::npos) << info;
#else
  EXPECT_NE(info.find("CUDA: not built ("), std::string::npos) << info;
  EXPECT_EQ(info.find("no nvcc at configure time"), std::string::npos) << info;
#endif
}

TEST(Version, MacrosAgreeWithTheString) {
  const std::string expected = std::to_string(FLASHBUF_VERSION_MAJOR) + "." + std::to_string(FLASHBUF_VERSION_MINOR) +
                               "." + std::to_string(FLASHBUF_VERSION_PATCH);
  EXPECT_EQ(expected, FLASHBUF_VERSION_STRING);
  EXPECT_EQ(FLASHBUF_VERSION, FLASHBUF_VERSION_MAJOR * 10000 + FLASHBUF_VERSION_MINOR * 100 + FLASHBUF_VERSION_PATCH);
}

}  // namespace
