// Host tests: argument validation. Every bad input throws flashbuf::ArgumentError naming the
// argument (and saying what was expected), and the outputs stay exactly as they were (they are
// poisoned before the call and compared byte for byte after). The CUDA device path's checks
// (16-byte alignment, instantiated head dims, fp32) are exercised through validate_attention
// with views marked as CUDA tensors: they fail before any device memory would be touched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <locale>
#include <string>
#include <vector>

#include "api/backends.hpp"
#include "api/validate.hpp"
#include "host/reference_names.hpp"
#include "reference/reference.hpp"
#include "reference/spec.hpp"

namespace flashbuf {
namespace {

class Validation : public ::testing::Test {
 protected:
  void SetUp() override { build(default_spec()); }

  static ProblemSpec default_spec() {
    ProblemSpec s;
    s.batch = 2; s.seqlen_q = 9; s.seqlen_k = 21; s.heads_q = 4; s.heads_kv = 2;
    s.head_dim = 128; s.head_dim_v = 128; s.dtype = DType::bf16;
    return s;
  }

  void build(const ProblemSpec& s) {
    spec = s;
    Rng rng(7);
    t = reference::make_tensors(spec, rng);
    args = reference::bind(spec, t);
    remember_outputs();
  }

  // What o and lse hold now: expect_error checks that a refused call left them so.
  void remember_outputs() {
    o_before.assign(static_cast<const char*>(t.o.data()), static_cast<const char*>(t.o.data()) + t.o.storage_bytes());
    lse_before.assign(static_cast<const char*>(t.lse.data()), static_cast<const char*>(t.lse.data()) + t.lse.storage_bytes());
  }

  // Paged K/V of pages of 4 keys, sequences of 9 and 13 keys, two spare pages.
  static ProblemSpec paged_spec() {
    ProblemSpec s = default_spec();
    s.kv = KvLayout::paged; s.page_size = 4; s.k_lens = {9, 13}; s.spare_pages = 2;
    return s;
  }

  // Runs f, expecting an ArgumentError for `arg` whose message contains `fragment`; then
  // checks that o and lse were not written.
  void expect_error(const std::function<void()>& f, const std::string& arg, const std::string& fragment,
                    bool type_error = false) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one for " << arg << " (" << fragment << ")";
    } catch (const ArgumentError& e) {
      EXPECT_EQ(e.argument(), arg) << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << "message: " << e.what();
      EXPECT_EQ(e.is_type_error(), type_error) << e.what();
    }
    EXPECT_EQ(std::memcmp(o_before.data(), t.o.data(), o_before.size()), 0) << "o was written";
    EXPECT_EQ(std::memcmp(lse_before.data(), t.lse.data(), lse_before.size()), 0) << "lse was written";
    EXPECT_TRUE(t.o.check_guards());
  }
  void expect_attention_error(const AttentionArgs& a, const std::string& arg, const std::string& fragment,
                              bool type_error = false) {
    expect_error([&] { attention(a); }, arg, fragment, type_error);
  }
  // The CUDA device path's checks, without a GPU: validation only.
  void expect_gpu_error(AttentionArgs a, const std::string& arg, const std::string& fragment, bool type_error = false) {
    for (TensorView* v : {&a.q, &a.k, &a.v, &a.o, &a.lse, &a.cu_seqlens_q, &a.cu_seqlens_k, &a.seqlens_k, &a.page_table}) {
      v->device = DeviceKind::cuda;
    }
    expect_error([&] { detail::validate_attention(a); }, arg, fragment, type_error);
  }

  ProblemSpec spec;
  AttentionTensors t;
  AttentionArgs args;
  std::vector<char> o_before, lse_before;
};

TEST_F(Validation, ValidArgumentsPass) {
  const detail::AttentionProblem p = detail::validate_attention(args);
  EXPECT_EQ(p.batch, 2);
  EXPECT_EQ(p.heads_q, 4);
  EXPECT_EQ(p.heads_kv, 2);
  EXPECT_FLOAT_EQ(p.softmax_scale, 1.0f / std::sqrt(128.0f));
  EXPECT_EQ(attention(args), Backend::cpu);
}

TEST_F(Validation, ShapeMismatchNamesTheTensorAndBothShapes) {
  AttentionArgs a = args;
  a.k.shape[3] = 64;
  expect_attention_error(a, "k", "expected shape (2, 21, 2, 128) [batch, seqlen_k, heads_kv, head_dim], got (2, 21, 2, 64)");
  a = args; a.v.shape[1] = 20;
  expect_attention_error(a, "v", "[batch, seqlen_k, heads_kv, head_dim_v]");
  a = args; a.o.shape[1] = 8;
  expect_attention_error(a, "o", "expected shape (2, 9, 4, 128)");
  a = args; a.lse.shape[2] = 10;
  expect_attention_error(a, "lse", "[batch, heads_q, seqlen_q]");
  a = args; a.q.rank = 2;
  expect_attention_error(a, "q", "expected rank 4");
  a = args; a.k.shape[0] = 3;
  expect_attention_error(a, "k", "[batch, seqlen_k, heads_kv, head_dim]");
}

TEST_F(Validation, MissingTensorsAndNullPointers) {
  AttentionArgs a = args;
  a.o = TensorView{};
  expect_attention_error(a, "o", "missing");
  a = args; a.v.data = nullptr;
  expect_attention_error(a, "v", "null data pointer");
}

TEST_F(Validation, StridesAndAlignment) {
  AttentionArgs a = args;
  a.q.stride[3] = 2;
  expect_attention_error(a, "q", "stride not supported");
  a = args; a.k.stride[1] = -a.k.stride[1];
  expect_attention_error(a, "k", "negative strides");
  a = args; a.o.data = static_cast<char*>(a.o.data) + 1;  // not even bf16-aligned
  expect_attention_error(a, "o", "unaligned");
}

TEST_F(Validation, DtypeErrorsAreTypeErrors) {
  AttentionArgs a = args;
  a.k.dtype = DType::fp16;
  expect_attention_error(a, "k", "does not match q's bf16", true);
  a = args; a.q.dtype = a.k.dtype = a.v.dtype = a.o.dtype = DType::int32;
  expect_attention_error(a, "q", "expected dtype bf16, fp16 or fp32", true);
  a = args; a.lse.dtype = DType::bf16;
  expect_attention_error(a, "lse", "expected dtype fp32", true);
}

TEST_F(Validation, HeadsMustDivide) {
  build([] { ProblemSpec s = default_spec(); s.heads_q = 3; s.heads_kv = 3; return s; }());
  AttentionArgs a = args;
  a.k.shape[2] = a.v.shape[2] = 2;
  expect_attention_error(a, "q", "heads_q = 3 is not a multiple of heads_kv = 2");
}

TEST_F(Validation, Devices) {
  AttentionArgs a = args;
  a.k.device = DeviceKind::cuda;
  expect_attention_error(a, "k", "is on cuda:0 but q is on cpu");
  a = args;
  a.backend = Backend::sm80;
  expect_attention_error(a, "backend", "CPU tensors");
}

TEST_F(Validation, GpuPathNeeds16ByteAlignmentAndInstantiatedHeadDims) {
  AttentionArgs a = args;
  a.q.data = static_cast<char*>(a.q.data) + 2;  // bf16-aligned, not 16-byte aligned
  expect_gpu_error(a, "q", "unaligned data pointer");
  build([] { ProblemSpec s = default_spec(); s.pad = 4; return s; }());  // row stride 132
  expect_gpu_error(args, "q", "not a multiple of 8 elements");
  build([] { ProblemSpec s = default_spec(); s.head_dim = s.head_dim_v = 80; return s; }());
  expect_gpu_error(args, "q", "head_dim 80 with head_dim_v 80 is not instantiated for bf16 on the GPU; built:");
  build([] { ProblemSpec s = default_spec(); s.dtype = DType::fp32; return s; }());
  expect_gpu_error(args, "q", "fp32 inputs are supported on the CPU only", true);
}

TEST_F(Validation, Scalars) {
  AttentionArgs a = args;
  a.softcap = -1.0f;
  expect_attention_error(a, "softcap", "must be 0 (off) or in [");
  a = args; a.softcap = std::numeric_limits<float>::quiet_NaN();
  expect_attention_error(a, "softcap", "got nan");
  a = args; a.softcap = 1e-40f;  // denormal: softcap * log2(e) loses the scores
  expect_attention_error(a, "softcap", "must be 0 (off) or in [");
  a = args; a.softcap = 3e38f;  // softcap * log2(e) overflows
  expect_attention_error(a, "softcap", "must be 0 (off) or in [");
  a = args; a.softcap = 1e-37f; a.softmax_scale = 1e3f;  // scale / softcap overflows
  expect_attention_error(a, "softcap", "softmax_scale / softcap overflows");
  a = args; a.softmax_scale = std::numeric_limits<float>::infinity();
  expect_attention_error(a, "softmax_scale", "finite");
  a = args; a.softmax_scale = -0.5f;  // the kernels take the row max before scaling
  expect_attention_error(a, "softmax_scale", "> 0");
  a = args; a.softmax_scale = 3e38f;  // scale * log2(e) overflows
  expect_attention_error(a, "softmax_scale", "at most");
  a = args; a.num_threads = -1;
  expect_attention_error(a, "num_threads", ">= 0");
  a = args; a.mask = Mask::window(-2, 0);
  expect_attention_error(a, "mask.window_left", ">= -1");
  a = args; a.mask = Mask::window(4, -7);
  expect_attention_error(a, "mask.window_right", ">= -1");
}

TEST_F(Validation, OutputsMayNotOverlapInputs) {
  // out = k (same shape here: Sq = Sk would be needed for the shapes; alias the storage).
  ProblemSpec s = default_spec();
  s.seqlen_q = s.seqlen_k;
  build(s);
  AttentionArgs a = args;
  a.o.data = a.k.data;
  expect_attention_error(a, "o", "shares memory with k");
  a = args; a.o.data = a.v.data;
  expect_attention_error(a, "o", "shares memory with v");
  a = args; a.o.data = a.q.data;
  expect_attention_error(a, "o", "shares memory with q");
  a = args; a.lse.data = a.q.data;
  expect_attention_error(a, "lse", "shares memory with q");
  a = args; a.lse.data = a.o.data;
  expect_attention_error(a, "o", "shares memory with lse");
  // A broadcast output would have several rows written to one address.
  a = args; a.o.stride[1] = 0;
  expect_attention_error(a, "o", "more than once");
  // Inputs may share memory with each other (q = k = v of one buffer).
  a = args; a.q.data = a.k.data;
  EXPECT_EQ(attention(a), Backend::cpu);
}

TEST_F(Validation, ZeroSizeTensorsAreValidWithAnyStrides) {
  for (int which = 0; which < 3; ++which) {
    ProblemSpec s = default_spec();
    if (which == 0) s.batch = 0;
    if (which == 1) s.seqlen_q = 0;
    if (which == 2) s.seqlen_k = 0;
    build(s);
    AttentionArgs a = args;
    // NumPy 2 gives empty arrays all-zero strides; nothing is addressed through them.
    for (TensorView* v : {&a.q, &a.k, &a.v, &a.o, &a.lse}) {
      if (v->numel() == 0) {
        for (int i = 0; i < v->rank; ++i) v->stride[i] = 0;
      }
    }
    EXPECT_EQ(attention(a), Backend::cpu) << which;
    if (which == 2) {  // no key: O = 0, LSE = -inf
      EXPECT_EQ(static_cast<const float*>(t.lse.data())[0], -std::numeric_limits<float>::infinity());
    }
  }
}

TEST_F(Validation, Sinks) {
  std::vector<float> sinks(spec.heads_q, 0.5f);
  AttentionArgs a = args;
  a.sinks = make_view(sinks.data(), DType::fp32, {spec.heads_q});
  EXPECT_NO_THROW(detail::validate_attention(a));
  a.sinks = make_view(sinks.data(), DType::fp32, {spec.heads_q - 1});
  expect_attention_error(a, "sinks", "[heads_q]");
  a.sinks = make_view(sinks.data(), DType::bf16, {spec.heads_q});
  expect_attention_error(a, "sinks", "expected dtype fp32", true);
  a.sinks = make_view(sinks.data(), DType::fp32, {1, spec.heads_q});
  expect_attention_error(a, "sinks", "[heads_q]");
  a.sinks = make_view(sinks.data(), DType::fp32, {spec.heads_q / 2});
  a.sinks.shape[0] = spec.heads_q;
  a.sinks.stride[0] = 2;
  expect_attention_error(a, "sinks", "contiguous");
  a.sinks = make_view(sinks.data(), DType::fp32, {spec.heads_q}, DeviceKind::cuda);
  expect_attention_error(a, "sinks", "is on cuda:0 but q is on cpu");
  a.sinks = make_view(t.o.data(), DType::fp32, {spec.heads_q});
  expect_attention_error(a, "o", "shares memory with sinks");
}

// Derived sizes beyond the kernels' int indices are refused before anything runs; stride-0
// views make the shapes cheap to build.
TEST_F(Validation, DerivedSizesWithinTheKernelsIndexTypes) {
  static std::uint16_t one[8] = {};
  auto broadcast = [](std::initializer_list<std::int64_t> shape) {
    TensorView v = make_view(one, DType::bf16, shape);
    for (int i = 0; i + 1 < v.rank; ++i) v.stride[i] = 0;
    return v;
  };
  std::vector<std::uint16_t> out(16 * 8, 0);
  AttentionArgs a;
  // Sq 2^24 x group 256: 2^32 packed rows.
  a.q = broadcast({1, 1 << 24, 256, 8});
  a.k = broadcast({1, 4, 1, 8});
  a.v = broadcast({1, 4, 1, 8});
  a.o = make_view(out.data(), DType::bf16, {1, 1 << 24, 256, 8});
  expect_error([&] { detail::validate_attention(a, {false}); }, "q", "packed rows exceed");
  // Sk = 2^31 - 1 with a window: key positions diag + window overflow int.
  a.q = broadcast({1, 4, 1, 8});
  a.k = broadcast({1, 2147483647, 1, 8});
  a.v = broadcast({1, 2147483647, 1, 8});
  a.mask = Mask::window(100, 0);
  expect_error([&] { detail::validate_attention(a, {false}); }, "k", "allow");
  // Paged capacity max_pages * page_size.
  std::vector<std::int32_t> lens(1, 0);
  a = AttentionArgs{};
  a.q = broadcast({1, 4, 1, 8});
  a.k = broadcast({2, 256, 1, 8});
  a.v = broadcast({2, 256, 1, 8});
  a.seqlens_k = make_view(lens.data(), DType::int32, {1});
  a.page_table = make_view(lens.data(), DType::int32, {1, 1 << 23});
  a.page_table.stride[0] = 0;
  expect_error([&] { detail::validate_attention(a, {false}); }, "page_table", "max_pages * page_size");
  // Strides whose reach overflows int64.
  a = AttentionArgs{};
  a.q = broadcast({2, 4, 1, 8});
  a.q.stride[0] = std::numeric_limits<std::int64_t>::max() / 2;
  a.k = broadcast({2, 4, 1, 8});
  a.v = broadcast({2, 4, 1, 8});
  expect_error([&] { detail::validate_attention(a, {false}); }, "q", "spans more than 2^63");
}

TEST_F(Validation, GpuGridLimits) {
  AttentionArgs a = args;
  static std::uint16_t one[8] = {};
  auto broadcast = [](std::initializer_list<std::int64_t> shape) {
    TensorView v = make_view(one, DType::bf16, shape, DeviceKind::cuda);
    for (int i = 0; i + 1 < v.rank; ++i) v.stride[i] = 0;
    return v;
  };
  a = AttentionArgs{};
  a.q = broadcast({70000, 4, 1, 128});
  a.k = broadcast({70000, 4, 1, 128});
  a.v = broadcast({70000, 4, 1, 128});
  if (detail::prefill_instantiated(DType::bf16, 128, 128)) {
    // Metadata scope: the views hold host memory, which the full scope's pointer check refuses
    // first on a machine with a GPU; the grid limits are metadata and checked in both scopes.
    expect_error([&] { detail::validate_attention(a, {false, CheckScope::metadata}); }, "q", "GPU grid holds");
  }
  DecodeProblem pr;
  pr.batch = 70000; pr.heads_q = 8; pr.heads_kv = 8; pr.head_dim = 128; pr.head_dim_v = 128;
  pr.max_seqlen_k = 64; pr.device = DeviceKind::cuda;
  expect_error([&] { detail::validate_decode_problem(pr); }, "problem.batch", "GPU grid");
}

// The shapes the bindings allocate before a call come from the same checks, and the metadata
// scope needs no pointers (torch.compile's fake tensors have none).
TEST_F(Validation, OutputShapesWithoutOutputsAndWithoutPointers) {
  AttentionArgs a = args;
  a.o = TensorView{};
  a.lse = TensorView{};
  const OutputShapes shapes = attention_output_shapes(a);
  EXPECT_EQ(shapes.o_rank, 4);
  EXPECT_EQ(shapes.o[0], spec.batch);
  EXPECT_EQ(shapes.o[1], spec.seqlen_q);
  EXPECT_EQ(shapes.o[2], spec.heads_q);
  EXPECT_EQ(shapes.o[3], spec.head_dim_v);
  EXPECT_EQ(shapes.lse_rank, 3);
  EXPECT_EQ(shapes.lse[2], spec.seqlen_q);
  for (TensorView* v : {&a.q, &a.k, &a.v}) v->data = nullptr;
  EXPECT_THROW(attention_output_shapes(a), ArgumentError);  // full scope: null pointers refused
  EXPECT_EQ(attention_output_shapes(a, CheckScope::metadata).o[3], spec.head_dim_v);
  a.k.shape[0] = spec.batch + 1;
  expect_error([&] { attention_output_shapes(a, CheckScope::metadata); }, "k", "[batch, seqlen_k, heads_kv, head_dim]");
}

// Messages never go through iostreams, whose numbers follow the process's global C++ locale
// (one with digit grouping would print 1,000,000; a locale from another libstdc++ can crash).
TEST_F(Validation, MessagesIgnoreTheGlobalLocale) {
  struct Grouping : std::numpunct<char> {
    char do_thousands_sep() const override { return ','; }
    std::string do_grouping() const override { return "\3"; }
  };
  const std::locale previous = std::locale::global(std::locale(std::locale::classic(), new Grouping));
  AttentionArgs a = args;
  a.k.shape[0] = 1000000;
  std::string message;
  try {
    detail::validate_attention(a);
  } catch (const ArgumentError& e) {
    message = e.what();
  }
  std::locale::global(previous);
  EXPECT_NE(message.find("1000000"), std::string::npos) << message;
}

TEST_F(Validation, MergeAndDecodeOutputsMayNotOverlap) {
  std::vector<float> parts(3 * 5 * 4 * 8, 0.0f), lse_parts(3 * 5 * 4, 0.0f), o(5 * 4 * 8), lse(5 * 4);
  MergeStatesArgs m;
  m.o_parts = make_view(parts.data(), DType::fp32, {3, 5, 4, 8});
  m.lse_parts = make_view(lse_parts.data(), DType::fp32, {3, 5, 4});
  m.o = make_view(o.data(), DType::fp32, {5, 4, 8});
  m.lse = make_view(lse.data(), DType::fp32, {5, 4});
  EXPECT_EQ(merge_states(m), Backend::cpu);
  MergeStatesArgs bad = m;
  bad.o = make_view(parts.data(), DType::fp32, {5, 4, 8});
  expect_error([&] { merge_states(bad); }, "o", "shares memory with o_parts");
  bad = m;
  bad.lse = make_view(lse_parts.data(), DType::fp32, {5, 4});
  expect_error([&] { merge_states(bad); }, "lse", "shares memory with lse_parts");
  const OutputShapes shapes = merge_output_shapes(m);
  EXPECT_EQ(shapes.o_rank, 3);
  EXPECT_EQ(shapes.lse[1], 4);

  ProblemSpec s = default_spec();
  s.seqlen_q = 1; s.use_seqlens_k = true; s.k_lens = {21, 3};
  build(s);
  DecodePlan plan = plan_decode(reference::decode_problem(s));
  DecodeArgs d = reference::bind_decode(s, t);
  plan.workspace_bytes = 256;  // as a split plan would have it
  alignas(256) static unsigned char ws[512];
  d.workspace = ws;
  EXPECT_NO_THROW(detail::validate_decode(plan, d));
  // o inside the workspace (both 256-byte aligned at one address).
  std::vector<unsigned char> buffer(t.o.storage_bytes() + 512);
  void* aligned = buffer.data() + (256 - reinterpret_cast<std::uintptr_t>(buffer.data()) % 256);
  d.o.data = aligned;
  d.workspace = aligned;
  expect_error([&] { detail::validate_decode(plan, d); }, "workspace", "shares memory with o");
  d = reference::bind_decode(s, t);
  d.num_threads = -2;
  expect_error([&] { decode(plan_decode(reference::decode_problem(s)), d); }, "num_threads", ">= 0");
}

TEST_F(Validation, CuSeqlens) {
  ProblemSpec s = default_spec();
  s.varlen_q = true; s.kv = KvLayout::varlen; s.batch = 3;
  s.q_lens = {4, 0, 5}; s.k_lens = {6, 2, 0};
  build(s);
  ASSERT_EQ(attention(args), Backend::cpu);  // valid, zero-length sequences included
  t.o.poison(); t.lse.poison();
  remember_outputs();

  std::int32_t* cu = t.cu_seqlens_q.i32();  // {0, 4, 4, 9}
  cu[0] = 1;  // the rows before the first offset would never be written
  expect_attention_error(args, "cu_seqlens_q[0]", "must be 0");
  cu[0] = 0;
  cu[1] = -1;
  expect_attention_error(args, "cu_seqlens_q[1]", "non-decreasing");
  cu[1] = 5; cu[2] = 3;
  expect_attention_error(args, "cu_seqlens_q[2]", "non-decreasing");
  cu[1] = 4; cu[2] = 4; cu[3] = 8;
  expect_attention_error(args, "cu_seqlens_q[3]", "must equal the number of rows of q (9)");
  cu[3] = 9;
  AttentionArgs a = args;
  a.max_seqlen_q = 4;
  expect_attention_error(a, "cu_seqlens_q[3]", "more than max_seqlen_q = 4");
  a = args; a.max_seqlen_q = -1;
  expect_attention_error(a, "max_seqlen_q", "negative");
  a = args; a.max_seqlen_q = 0; a.max_seqlen_k = 0;  // derived from the host offsets
  EXPECT_EQ(detail::validate_attention(a).max_seqlen_q, 5);
  EXPECT_EQ(detail::validate_attention(a).max_seqlen_k, 6);
  a = args; a.max_seqlen_q = 0x7fffffff; a.max_seqlen_k = 0x7fffffff;  // bounds past the rows: the rows
  EXPECT_EQ(detail::validate_attention(a).max_seqlen_q, 9);
  EXPECT_EQ(detail::validate_attention(a).max_seqlen_k, 8);
  t.cu_seqlens_k.i32()[3] = 9;  // {0, 6, 8, 9}: one key more than k holds
  expect_attention_error(args, "cu_seqlens_k[3]", "number of rows of k (8)");
  t.cu_seqlens_k.i32()[3] = 8;
  a = args; a.cu_seqlens_q.dtype = DType::fp32;
  expect_attention_error(a, "cu_seqlens_q", "expected dtype int32", true);
  a = args; a.cu_seqlens_q.shape[0] = 0;
  expect_attention_error(a, "cu_seqlens_q", "at least one entry");
}

TEST_F(Validation, PagedAndSeqlensK) {
  build(paged_spec());
  ASSERT_EQ(attention(args), Backend::cpu);
  t.o.poison(); t.lse.poison();
  remember_outputs();

  const int pool = static_cast<int>(t.k.shape()[0]);
  const int cols = static_cast<int>(t.page_table.shape()[1]);
  std::int32_t* table = t.page_table.i32();
  const std::int32_t saved = table[cols + 1];
  table[cols + 1] = pool;
  expect_attention_error(args, "page_table[1][1]", "outside the pool of " + std::to_string(pool) + " pages");
  table[cols + 1] = -3;
  expect_attention_error(args, "page_table[1][1]", "outside the pool");
  table[cols + 1] = saved;
  table[cols - 1] = 12345;  // past sequence 0's pages: never read, so accepted
  EXPECT_NO_THROW(detail::validate_attention(args));

  t.seqlens_k.i32()[0] = cols * 4 + 1;
  expect_attention_error(args, "seqlens_k[0]", "exceed the capacity of k");
  t.seqlens_k.i32()[0] = -1;
  expect_attention_error(args, "seqlens_k[0]", "negative");
  t.seqlens_k.i32()[0] = 9;

  AttentionArgs a = args;
  a.seqlens_k = TensorView{};
  expect_attention_error(a, "seqlens_k", "required with page_table");
  a = args; a.cu_seqlens_k = t.seqlens_k.view(); a.cu_seqlens_k.shape[0] = 3;
  expect_attention_error(a, "cu_seqlens_k", "cannot be combined with page_table");

  build([] { ProblemSpec x = default_spec(); x.kv = KvLayout::paged; x.page_size = 300; x.seqlen_k = 5; return x; }());
  expect_attention_error(args, "k", "page size 300");
}

// Inputs a robustness audit found getting past the checks or ending the process.
TEST_F(Validation, AuditedInputs) {
  // An element count that wraps to 0 made q look empty, skipping the pointer and span checks.
  AttentionArgs a = args;
  for (int i = 0; i < 4; ++i) a.q.shape[i] = 65536, a.q.stride[i] = 0;
  expect_attention_error(a, "q", "more than 2^63 elements");
  // A head dim beyond any backend's (the CPU scratch grows with it: bad_alloc, or the OOM killer).
  build([] { ProblemSpec x = default_spec(); x.head_dim = x.head_dim_v = 16385; x.seqlen_q = 1; x.seqlen_k = 1; return x; }());
  expect_attention_error(args, "q", "head_dim 16385 exceeds the 16384");
  build(default_spec());
  // A bound the batch shapes contradict is refused, not ignored.
  a = args;
  a.max_seqlen_q = spec.seqlen_q - 1;
  expect_attention_error(a, "max_seqlen_q", "less than q's seqlen_q");
  a = args;
  a.max_seqlen_k = spec.seqlen_k - 1;
  expect_attention_error(a, "max_seqlen_k", "less than k's seqlen_k");
  a.max_seqlen_k = spec.seqlen_k;
  EXPECT_NO_THROW(detail::validate_attention(a));
  // An optional tensor with a pointer but no shape is a mistake, not "absent".
  a = args;
  a.lse.rank = 0;
  expect_attention_error(a, "lse", "rank 0 (absent) but a data pointer is set");
}

// A page table whose row stride steps over memory that is not the caller's: validation reads
// only the rows' own entries (it copied the whole span, and a stride of 2^40 asked for 4 TB).
// Rows that overlap (stride 0, a broadcast table) are read as the one span they cover.
TEST_F(Validation, PageTableRowsAreReadAsTheViewAddressesThem) {
  build(paged_spec());
  ASSERT_EQ(attention(args), Backend::cpu);
  const reference::RowResults want = reference::gather_output(spec, t, reference::all_rows(spec));
  const std::int64_t cols = t.page_table.shape()[1];
  // Row 1 placed far from row 0 in a buffer of which only the two rows are written.
  const std::int64_t far = std::int64_t(1) << 20;
  std::vector<std::int32_t> table(static_cast<std::size_t>(far + cols), -7);
  for (std::int64_t j = 0; j < cols; ++j) {
    table[j] = t.page_table.i32()[j];
    table[far + j] = t.page_table.i32()[cols + j];
  }
  AttentionArgs a = args;
  a.page_table.data = table.data();
  a.page_table.stride[0] = far;
  t.o.poison();
  ASSERT_EQ(attention(a), Backend::cpu);
  EXPECT_EQ(reference::gather_output(spec, t, reference::all_rows(spec)).o, want.o);
  remember_outputs();
  table[far + 1] = 999;  // a page sequence 1 uses, outside the pool: found in the far row
  expect_attention_error(a, "page_table[1][1]", "outside the pool");
  a.page_table.stride[0] = std::int64_t(1) << 40;  // metadata only: never dereferenced
  EXPECT_EQ(attention_output_shapes(a, CheckScope::metadata).o[3], spec.head_dim_v);

  // Stride 0: both sequences read sequence 1's pages, as from a table of two equal rows.
  std::vector<std::int32_t> shared_row(t.page_table.i32() + cols, t.page_table.i32() + 2 * cols);
  std::vector<std::int32_t> equal_rows = shared_row;
  equal_rows.insert(equal_rows.end(), shared_row.begin(), shared_row.end());
  a = args;
  a.page_table.data = equal_rows.data();
  ASSERT_EQ(attention(a), Backend::cpu);
  const reference::RowResults want_shared = reference::gather_output(spec, t, reference::all_rows(spec));
  a.page_table.data = shared_row.data();
  a.page_table.stride[0] = 0;
  t.o.poison();
  ASSERT_EQ(attention(a), Backend::cpu);
  EXPECT_EQ(reference::gather_output(spec, t, reference::all_rows(spec)).o, want_shared.o);
  remember_outputs();
  shared_row[3] = -1;  // the page only sequence 1's 13 keys reach (sequence 0's 9 use three)
  expect_attention_error(a, "page_table[1][3]", "outside the pool");
}

TEST_F(Validation, MergeStates) {
  reference::HostTensor o_parts(DType::fp32, {3, 5, 2, 16}), lse_parts(DType::fp32, {3, 5, 2});
  reference::HostTensor o(DType::fp32, {5, 2, 16}), lse(DType::fp32, {5, 2});
  MergeStatesArgs m;
  m.o_parts = o_parts.view(); m.lse_parts = lse_parts.view(); m.o = o.view(); m.lse = lse.view();
  EXPECT_NO_THROW(detail::validate_merge(m));
  MergeStatesArgs bad = m;
  bad.lse_parts.shape[1] = 4;
  expect_error([&] { merge_states(bad); }, "lse_parts", "expected shape (3, 5, 2) [num_parts, tokens, heads]");
  bad = m; bad.o.shape[2] = 8;
  expect_error([&] { merge_states(bad); }, "o", "[tokens, heads, head_dim_v]");
  bad = m; bad.lse_parts.dtype = DType::bf16;
  expect_error([&] { merge_states(bad); }, "lse_parts", "expected dtype fp32", true);
  bad = m; bad.o.dtype = DType::bf16;
  expect_error([&] { merge_states(bad); }, "o", "does not match o_parts's fp32", true);
  EXPECT_TRUE(o.check_guards() && !o.fully_written() && !lse.fully_written());
}

TEST_F(Validation, DecodePlanAndArguments) {
  DecodeProblem d{};
  d.batch = 2; d.q_per_seq = 1; d.heads_q = 8; d.heads_kv = 2; d.head_dim = 64; d.head_dim_v = 64;
  d.max_seqlen_k = 100; d.device = DeviceKind::cpu;
  EXPECT_NO_THROW(plan_decode(d));
  DecodeProblem bad = d;
  bad.q_per_seq = 17;
  expect_error([&] { plan_decode(bad); }, "problem.q_per_seq", "1..16");
  bad = d; bad.page_size = 300;
  expect_error([&] { plan_decode(bad); }, "problem.page_size", "1..256");
  bad = d; bad.heads_q = 7;
  expect_error([&] { plan_decode(bad); }, "problem.heads_q", "not a multiple");
  bad = d; bad.device = DeviceKind::cuda; bad.dtype = DType::fp32;
  expect_error([&] { plan_decode(bad); }, "problem.dtype", "CPU only", true);

  ProblemSpec s = default_spec();
  s.seqlen_q = 2; s.use_seqlens_k = true; s.k_lens = {21, 3};
  build(s);
  const DecodePlan plan = plan_decode(reference::decode_problem(s));
  DecodeArgs args_d = reference::bind_decode(s, t);
  EXPECT_EQ(decode(plan, args_d), Backend::cpu);
  t.o.poison(); t.lse.poison();
  remember_outputs();

  DecodeArgs a = args_d;
  a.q.shape[1] = 3;
  expect_error([&] { decode(plan, a); }, "q", "[batch, q_per_seq, heads_q, head_dim]");
  a = args_d; a.seqlens_k = TensorView{};
  expect_error([&] { decode(plan, a); }, "seqlens_k", "missing");
  a = args_d; a.page_table = t.seqlens_k.view();
  expect_error([&] { decode(plan, a); }, "page_table", "contiguous cache");
  DecodePlan tight = plan;
  tight.problem.max_seqlen_k = 10;  // sequence 0 has 21 keys
  expect_error([&] { decode(tight, args_d); }, "seqlens_k[0]", "exceed max_seqlen_k = 10");
  DecodePlan needs_workspace = plan;
  needs_workspace.workspace_bytes = 1024;
  expect_error([&] { decode(needs_workspace, args_d); }, "workspace", "null");
  a = args_d; a.lse.shape[2] = 1;
  expect_error([&] { decode(plan, a); }, "lse", "[batch, heads_q, seqlen_q]");
}

}  // namespace
}  // namespace flashbuf
