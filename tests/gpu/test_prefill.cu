// GPU tests of prefill through the public API on CUDA tensors, for each GPU kernel (the
// mma.sync kernel "sm80" and the Hopper wgmma kernel "sm90", each requested explicitly): every
// feature against the float64 reference on fresh random inputs with odd sizes, outputs
// poisoned before the run, guard regions around every device tensor checked after; paged
// against contiguous and varlen against per-sequence runs (bit-identical: same tiles, same
// order); small cases named *Sanitizer* for compute-sanitizer.
#include <cstdint>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <utility>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "api/backends.hpp"
#include "cuda/prefill_grid_knob.hpp"
#include "cuda/prefill_grid_taken.hpp"
#include "flashbuf/core/gqa_packing.hpp"
#include "flashbuf/core/paged_boxes.hpp"
#include "flashbuf/core/work_items.hpp"
#include "flashbuf/kernels/prefill_tiles.hpp"
#include "gpu_test_util.cuh"
#include "reference/check.hpp"
#include "reference/device_mirror.hpp"
#include "reference/gpu_reference.hpp"
#include "reference/spec.hpp"

namespace flashbuf::reference {
namespace {

// Runs the spec on the GPU and leaves o / lse in `t` (host). Returns guard violations.
std::string run_on_gpu(const ProblemSpec& spec, AttentionTensors& t, Backend backend) {
  DeviceProblem d(t);
  const TensorPointers ptrs = d.pointers();
  AttentionArgs args = bind(spec, t, DeviceKind::cuda, &ptrs);
  args.backend = backend;
  const Backend ran = attention(args);
  EXPECT_EQ(ran, backend) << "expected the requested kernel to run";
  EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());
  d.download_outputs(t);
  return d.guard_violations();
}

// run_on_gpu, and the grid its prefill launch took (detail::last_prefill_grid; none where it
// launched no prefill kernel): a test that compares the persistent walk with a block per item
// asks it, so that a launcher rule declining the walk fails the test.
detail::PrefillGrid run_on_gpu_noting_grid(const ProblemSpec& spec, AttentionTensors& t, Backend backend) {
  detail::last_prefill_grid = detail::PrefillGrid::none;
  EXPECT_EQ(run_on_gpu(spec, t, backend), "") << "device guard regions overwritten";
  return detail::last_prefill_grid;
}
// The same under the grid knob's per_block: a block per query block, whatever grid the
// launcher's rule would take.
detail::PrefillGrid run_on_gpu_per_block(const ProblemSpec& spec, AttentionTensors& t, Backend backend) {
  TuningOverrides per_block = tuning_overrides();
  per_block.prefill_grid = PrefillGridOverride::per_block;
  per_block.prefill_grid_blocks = 0;
  const ScopedTuning scope(per_block);
  return run_on_gpu_noting_grid(spec, t, backend);
}

// Fresh inputs, GPU run, check against the float64 reference computed on the device (a row
// sample for big problems).
// `edit` may change the inputs after they are made (e.g. poison what no kernel may read).
void check_spec(const ProblemSpec& spec, Backend backend, int max_rows_checked = 1500,
                const std::function<void(AttentionTensors&)>& edit = {}) {
  spec.check();
  // A build with a restricted instantiation list (FLASHBUF_INSTANTIATIONS) skips the other cases.
  if (!detail::prefill_instantiated(spec.dtype, spec.head_dim, spec.head_dim_v))
    GTEST_SKIP() << spec.describe() << ": not instantiated in this build";
  Rng rng(Rng::fresh_seed());
  SCOPED_TRACE(spec.describe() + " on " + backend_name(backend) + " seed " + std::to_string(rng.seed()));
  AttentionTensors t = make_tensors(spec, rng);
  if (edit) edit(t);
  const std::string device_guards = run_on_gpu(spec, t, backend);
  EXPECT_EQ(device_guards, "") << "device guard regions overwritten";
  std::vector<RowId> rows = all_rows(spec);
  if (static_cast<int>(rows.size()) > max_rows_checked) rows = sample_rows(spec, rng, max_rows_checked);
  ASSERT_TRUE(t.o.fully_written() || spec.total_q() == 0) << "some output element was never written";
  const AttentionCheck c = gpu_check_attention(spec, t, &rows);
  EXPECT_TRUE(c.ok) << c.summary();
}

ProblemSpec base_spec(DType dtype, int d, int dv, int sq, int sk) {
  ProblemSpec s;
  s.dtype = dtype;
  s.head_dim = d;
  s.head_dim_v = dv;
  s.seqlen_q = sq;
  s.seqlen_k = sk;
  s.batch = 2;
  s.heads_q = 4;
  s.heads_kv = 2;
  return s;
}

// A bf16 varlen batch of two K/V heads with `group` query heads each, a sequence per length pair.
ProblemSpec varlen_spec(int d, int dv, int group, const std::vector<int>& q_lens, const std::vector<int>& k_lens,
                        Mask mask) {
  ProblemSpec s = base_spec(DType::bf16, d, dv, 0, 0);
  s.heads_kv = 2;
  s.heads_q = 2 * group;
  s.varlen_q = true;
  s.kv = KvLayout::varlen;
  s.q_lens = q_lens;
  s.k_lens = k_lens;
  s.batch = static_cast<int>(q_lens.size());
  s.mask = mask;
  return s;
}

struct HeadDims {
  int d, dv;
};
const HeadDims kHeadDims[] = {{64, 64}, {96, 96}, {128, 128}, {192, 128}, {192, 192}, {256, 256}};

bool instantiated(DType dtype, HeadDims hd) { return detail::prefill_instantiated(dtype, hd.d, hd.dv); }

// Runs check(head dims, rng) for each of `dims` built in this binary (bf16), each with a fresh
// seed in its trace, up to the first fatal failure; skips the test where none is built.
template <class Check>
void for_each_built_head_dims(std::initializer_list<HeadDims> dims, Check check) {
  bool ran = false;
  for (const HeadDims hd : dims) {
    if (!instantiated(DType::bf16, hd)) continue;
    ran = true;
    Rng rng(Rng::fresh_seed());
    SCOPED_TRACE("D " + std::to_string(hd.d) + " seed " + std::to_string(rng.seed()));
    check(hd, rng);
    if (::testing::Test::HasFatalFailure()) return;
  }
  if (!ran) GTEST_SKIP() << "none of these bf16 head dims is built";
}

// Every test runs on each GPU kernel; the Hopper one only where it can run.
class PrefillGpu : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      cudaGetLastError();
      GTEST_SKIP() << "no CUDA GPU on this machine: GPU test skipped";
    }
    if (GetParam() == Backend::sm90 && !detail::sm90_prefill_available(0))
      GTEST_SKIP() << "the Hopper kernel needs compute capability 9.0 and sm_90a code";
  }
  Backend backend() const { return GetParam(); }
};
std::string backend_param_name(const ::testing::TestParamInfo<Backend>& info) { return backend_name(info.param); }

// One test per (dtype, head dims) so each stays well inside the per-test timeout.
class PrefillHeadDims : public ::testing::TestWithParam<std::tuple<Backend, DType, HeadDims>> {};

TEST_P(PrefillHeadDims, EveryMaskOddSizes) {
  FLASHBUF_REQUIRE_GPU();
  const auto [backend, dtype, hd] = GetParam();
  if (!instantiated(dtype, hd)) GTEST_SKIP() << "not instantiated in this build";
  if (backend == Backend::sm90 && !detail::sm90_prefill_available(0)) GTEST_SKIP() << "no Hopper kernel here";
  const std::pair<int, int> sizes[] = {{1, 1}, {17, 17}, {127, 1000}, {1000, 127}, {33, 4097}};
  for (auto [sq, sk] : sizes)
    for (Mask mask : {Mask::none(), Mask::causal(), Mask::window(37, 5)}) {
      ProblemSpec s = base_spec(dtype, hd.d, hd.dv, sq, sk);
      s.mask = mask;
      check_spec(s, backend, 250);
    }
}

INSTANTIATE_TEST_SUITE_P(
    AllHeadDims, PrefillHeadDims,
    ::testing::Combine(::testing::Values(Backend::sm80, Backend::sm90), ::testing::Values(DType::bf16, DType::fp16),
                       ::testing::ValuesIn(kHeadDims)),
    [](const auto& info) {
      const HeadDims hd = std::get<2>(info.param);
      return std::string(backend_name(std::get<0>(info.param))) + "_" + dtype_name(std::get<1>(info.param)) + "_" +
             std::to_string(hd.d) + "_" + std::to_string(hd.dv);
    });

TEST_P(PrefillGpu, LongSequence4097Causal) {
  ProblemSpec s = base_spec(DType::bf16, 128, 128, 4097, 4097);
  s.batch = 1;
  s.mask = Mask::causal();
  check_spec(s, backend(), 800);
}

// Causal blocks per item in the longest-first order's sections (core/work_items.hpp), the pairs
// not divided evenly among them: the query length is chosen so that a section holds 3 of the 5
// or 8 (head, sequence) pairs on this device (for the Hopper kernel's blocks of 128 rows, one a
// SM), and 4500 more keys than queries make the items long enough for a block each rather than
// the persistent grid (the mma.sync kernel keeps the grid's order and runs the same problems).
TEST_P(PrefillGpu, CausalOrderInSectionsOfAWave) {
  int device = 0, sms = 0;
  ASSERT_EQ(cudaSuccess, cudaGetDevice(&device));
  ASSERT_EQ(cudaSuccess, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  for (const int heads_kv : {5, 2}) {
    const int heads_q = heads_kv == 5 ? 5 : 4, batch = heads_kv == 5 ? 1 : 2, pairs = heads_q * batch;
    const int m_blocks = (sms + 1) / 3;  // sections of 3 pairs
    ASSERT_EQ(longest_first_section(MaskParams{128 * m_blocks, 128 * m_blocks, -1, 0}, m_blocks, pairs, sms), 3);
    ProblemSpec s = base_spec(DType::bf16, 128, 128, 128 * m_blocks - 37, 128 * m_blocks - 37 + 4500);
    s.heads_q = heads_q;
    s.heads_kv = heads_kv;
    s.batch = batch;
    s.mask = Mask::causal();
    check_spec(s, backend(), 600);
  }
}

TEST_P(PrefillGpu, GqaMqaSoftcapScaleAndStridedViews) {
  for (int heads_kv : {1, 2, 8}) {
    ProblemSpec s = base_spec(DType::bf16, 128, 128, 200, 333);
    s.heads_q = 8;
    s.heads_kv = heads_kv;
    s.softcap = heads_kv == 2 ? 15.0f : 0.0f;
    s.softmax_scale = heads_kv == 8 ? 0.05f : 0.0f;
    s.pad = heads_kv == 1 ? 8 : 0;  // rows further apart than heads * dim
    s.input_stddev = 2.0;
    s.mask = heads_kv == 1 ? Mask::causal() : Mask::none();
    check_spec(s, backend());
  }
}

TEST_P(PrefillGpu, VarlenWithZeroLengthSequences) {
  ProblemSpec s = base_spec(DType::fp16, 64, 64, 0, 0);
  s.batch = 5;
  s.varlen_q = true;
  s.kv = KvLayout::varlen;
  s.q_lens = {0, 129, 1, 300, 17};
  s.k_lens = {5, 200, 0, 300, 1};
  s.mask = Mask::causal();
  check_spec(s, backend());
}

TEST_P(PrefillGpu, PagedEveryPageSize) {
  for (int page : {1, 3, 16, 64, 100, 256}) {
    ProblemSpec s = base_spec(DType::bf16, 128, 128, 77, 0);
    s.kv = KvLayout::paged;
    s.page_size = page;
    s.k_lens = {300, 555};
    s.mask = page % 2 ? Mask::causal() : Mask::window(64, 64);
    check_spec(s, backend());
  }
}

// Every head's K and V at (outer, row) set to NaN: outer is the sequence (batch form) or the
// pool page (paged), row the key row within it.
void poison_kv_row(AttentionTensors& t, const ProblemSpec& s, std::int64_t outer, std::int64_t row) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int h = 0; h < s.heads_kv; ++h) {
    for (int c = 0; c < s.head_dim; ++c) t.k.set(t.k.offset({outer, row, h, c}), nan);
    for (int c = 0; c < s.head_dim_v; ++c) t.v.set(t.v.offset({outer, row, h, c}), nan);
  }
}

// Every pool row of a paged spec that holds no key set to NaN (past each sequence's end in its
// last page, unused and spare pages), and the table's padding entries pointed at a page of no
// key: no kernel may multiply such a row in, not even by P = 0 (a V row read past the end turns
// O into NaN; a K row is masked to -inf before it matters, so V is what catches an over-read).
void poison_pool_rows_without_keys(AttentionTensors& t, const ProblemSpec& s) {
  const int page = s.page_size;
  const std::int64_t pool = t.k.shape()[0];
  std::int32_t* table = t.page_table.i32();
  std::vector<char> is_key(pool * page, 0);
  for (int b = 0; b < s.batch; ++b)
    for (int j = 0; j < s.k_len(b); ++j) is_key[table[b * s.max_pages() + j / page] * page + j % page] = 1;
  std::int64_t keyless_page = -1;  // a spare page: the padding entries point here
  for (std::int64_t pg = 0; pg < pool && keyless_page < 0; ++pg)
    if (std::none_of(&is_key[pg * page], &is_key[pg * page] + page, [](char k) { return k != 0; })) keyless_page = pg;
  ASSERT_GE(keyless_page, 0) << "the spec has spare pages";
  for (int b = 0; b < s.batch; ++b)
    for (int j = s.pages_per_seq(b); j < s.max_pages(); ++j) table[b * s.max_pages() + j] = keyless_page;
  for (std::int64_t pg = 0; pg < pool; ++pg)
    for (int r = 0; r < page; ++r)
      if (!is_key[pg * page + r]) poison_kv_row(t, s, pg, r);
}

// No mask, causal, a window: the i-th of them, so consecutive cases rotate through all three.
Mask rotating_mask(int i) {
  const Mask masks[] = {Mask::none(), Mask::causal(), Mask::window(100, 20)};
  return masks[i % 3];
}

// Pool rows that hold no key are NaN (poison_pool_rows_without_keys). The Hopper kernel's TMA
// path reads whole boxes of pages and gathers the tile that reaches past the end; the gathers
// zero-fill. Page sizes on both sides of the TMA rule (boxes of gcd(page, key tile) rows, a
// multiple of 8 holding >= 2 KB: pages 24 and 40 give 8-row boxes whose tiles cross page ends,
// TMA from D 128, the gather at D 64), every head dim, lengths that end mid-page, on a tile,
// inside the first tile.
TEST_P(PrefillGpu, PagedRowsWithoutKeysAreNeverRead) {
  // Every head dim (key tiles 128 and 64) at a page dividing the tile, one sharing only 8 rows
  // with it, one not a multiple of 8 (the gather) and one of several tiles; the first head dim
  // at the other sizes too (all sizes at every head dim took > 80 s under the sharded run).
  int run = 0;  // the masks rotate over (head dim, page size) pairs
  bool first = true;
  for (const HeadDims hd : kHeadDims) {
    if (!instantiated(DType::bf16, hd)) continue;
    ++run;
    const std::vector<int> pages =
        first ? std::vector<int>{8, 16, 24, 40, 64, 100, 128, 256} : std::vector<int>{16, 40, 100, 256};
    first = false;
    for (int page : pages) {
      ProblemSpec s = base_spec(DType::bf16, hd.d, hd.dv, 77, 0);
      s.kv = KvLayout::paged;
      s.page_size = page;
      s.batch = 3;
      s.k_lens = {5, 256, 555};
      s.mask = rotating_mask(run++);
      check_spec(s, backend(), 1500, [&](AttentionTensors& t) { poison_pool_rows_without_keys(t, s); });
    }
  }
}

// A K/V cache (paged, or batch-form with per-sequence lengths: seqlens_k) over short items takes
// Hopper's persistent grid (prefill_sm90_persistent.cuh's cache walk), which may meet items that
// see no key at all under the device's lengths: a sequence without keys, and causal or windowed
// rows before a short sequence's first key, whole 128-row items of them. Each walks one tile the
// mask hides whole and writes O = 0 and its LSE as a block per item does: a tile past the
// sequence's end, gathered as zeros (300 queries over 40 keys), or one of real keys that comes by
// TMA (300 over 150). Against the float64 reference with every cache row that holds no key NaN,
// pages read in boxes (16, 64; 24 crosses a page end inside a tile: 8-row boxes at D 128) and a
// batch-form cache of 600 rows, and on Hopper bit for bit (O and LSE) against the same inputs run
// a block per item (the grid knob's per_block), where both take the same key tile (D 64, 128) and
// the walk can box the pages (page 24 at D 64 cannot: 1 KB boxes, so both runs would be a block
// per item).
TEST_P(PrefillGpu, CacheItemsWithoutKeysOnThePersistentGrid) {
  int run = 0;
  for_each_built_head_dims({HeadDims{64, 64}, HeadDims{128, 128}, HeadDims{256, 256}}, [&](HeadDims hd, Rng& rng) {
    for (const int page : {16, 24, 64, 0}) {  // 0: a batch-form cache
      ProblemSpec s = base_spec(DType::bf16, hd.d, hd.dv, 300, page ? 0 : 600);
      if (page) {
        s.kv = KvLayout::paged;
        s.page_size = page;
      } else {
        s.use_seqlens_k = true;
      }
      s.batch = 4;
      s.k_lens = {0, 40, 150, 555};
      s.mask = run++ % 2 ? Mask::window(50, 0) : Mask::causal();
      check_spec(s, backend(), 1500, [&](AttentionTensors& t) {
        if (page) {
          poison_pool_rows_without_keys(t, s);
        } else {
          for (int b = 0; b < s.batch; ++b)
            for (int j = s.k_len(b); j < s.seqlen_k; ++j) poison_kv_row(t, s, b, j);
        }
      });
      if (::testing::Test::HasFatalFailure() || backend() != Backend::sm90 || hd.d > 128) continue;
      const int walk_block_n = prefill_sm90_tile(hd.d, hd.dv, true).block_n;
      if (page && paged_tma::box_rows(page, walk_block_n, 2 * std::min(hd.d, hd.dv)) == 0) continue;
      const std::uint64_t seed = rng.seed() + page;
      Rng r1(seed), r2(seed);
      AttentionTensors walk = make_tensors(s, r1), blocks = make_tensors(s, r2);
      ASSERT_EQ(run_on_gpu_noting_grid(s, walk, backend()), detail::PrefillGrid::persistent_walk) << "page " << page;
      ASSERT_EQ(run_on_gpu_per_block(s, blocks, backend()), detail::PrefillGrid::block_per_item) << "page " << page;
      for (const auto& [x, y, name] : {std::tuple{&walk.o, &blocks.o, "O"}, std::tuple{&walk.lse, &blocks.lse, "LSE"}})
        for (std::int64_t i = 0; i < x->numel(); ++i)
          ASSERT_EQ(x->get(x->logical_to_storage(i)), y->get(y->logical_to_storage(i)))
              << "page " << page << ": " << name << " element " << i;
    }
  });
}

// Batch-form K/V with per-sequence lengths (a cache of capacity seqlen_k): the rows past each
// sequence's length are NaN and must never be read (the Hopper kernel's TMA path gathers the
// tile that reaches past the end).
TEST_P(PrefillGpu, SeqlensKRowsPastTheEndAreNeverRead) {
  int run = 0;
  for (const HeadDims hd : kHeadDims) {
    if (!instantiated(DType::bf16, hd)) continue;
    ProblemSpec s = base_spec(DType::bf16, hd.d, hd.dv, 77, 600);
    s.batch = 3;
    s.use_seqlens_k = true;
    s.k_lens = {5, 256, 555};
    s.mask = rotating_mask(run++);
    check_spec(s, backend(), 1500, [&](AttentionTensors& t) {
      for (int b = 0; b < s.batch; ++b)
        for (int j = s.k_len(b); j < s.seqlen_k; ++j) poison_kv_row(t, s, b, j);
    });
  }
}

// Paged and contiguous K/V hold the same keys: the kernel walks the same tiles in the same
// order, so the outputs must be bit-identical. Hopper at D 256: keys enough (2400: 37 tiles of
// 64 a query block) that both runs take a block per item and its 80-key tiles (the persistent
// grid's 64-key tiles would round differently, and pages it cannot box keep a block per item);
// pages of 16 and 64 are then read in 16-row boxes, pages of 1 gathered. With the persistent grid
// forced (FLASHBUF_PREFILL_GRID=on or a block count) D 256's contiguous run takes 64-key tiles
// after all, so only D 64 is compared there.
TEST_P(PrefillGpu, PagedMatchesContiguousBitExactly) {
  const bool persistent_forced = detail::persistent_grid_knob().forced;
  for_each_built_head_dims({HeadDims{64, 64}, HeadDims{256, 256}}, [&](HeadDims hd, Rng& rng) {
    if (backend() == Backend::sm90 && persistent_forced && hd.d > 128) return;
    ProblemSpec contiguous = base_spec(DType::bf16, hd.d, hd.dv, 150, hd.d > 128 ? 2400 : 700);
    contiguous.mask = Mask::causal();
    AttentionTensors a = make_tensors(contiguous, rng);
    ASSERT_EQ(run_on_gpu(contiguous, a, backend()), "");
    for (int page : {1, 16, 64}) {
      ProblemSpec paged = contiguous;
      paged.kv = KvLayout::paged;
      paged.page_size = page;
      Rng rng2(rng.seed() + page);
      AttentionTensors b = make_tensors(paged, rng2);
      copy_to_paged(a, paged, b);  // the same q and keys
      ASSERT_EQ(run_on_gpu(paged, b, backend()), "");
      for (std::int64_t i = 0; i < a.o.numel(); ++i)
        ASSERT_EQ(a.o.get(a.o.logical_to_storage(i)), b.o.get(b.o.logical_to_storage(i)))
            << "page " << page << " element " << i;
    }
  });
}

// A varlen batch equals running each sequence on its own. Varlen queries keep a block per
// query block; the single sequences are batch-form, so on Hopper they run on the persistent
// grid, whose D 64 items have 128 query rows against the block's 64.
TEST_P(PrefillGpu, VarlenMatchesPerSequenceRunsBitExactly) {
  for_each_built_head_dims({HeadDims{64, 64}, HeadDims{128, 128}}, [&](HeadDims hd, Rng& rng) {
    ProblemSpec packed = base_spec(DType::bf16, hd.d, hd.dv, 0, 0);
    packed.batch = 3;
    packed.varlen_q = true;
    packed.kv = KvLayout::varlen;
    packed.q_lens = {70, 1, 260};
    packed.k_lens = {90, 40, 260};
    packed.mask = Mask::causal();
    AttentionTensors a = make_tensors(packed, rng);
    ASSERT_EQ(run_on_gpu(packed, a, backend()), "");
    std::int64_t q_row = 0, k_row = 0;
    for (int b = 0; b < packed.batch; ++b) {
      ProblemSpec one = base_spec(DType::bf16, hd.d, hd.dv, packed.q_lens[b], packed.k_lens[b]);
      one.batch = 1;
      one.mask = packed.mask;
      Rng rng2(rng.seed() + b);
      AttentionTensors s = make_tensors(one, rng2);
      reference::copy_varlen_sequence(a, q_row, k_row, one, s);
      ASSERT_EQ(run_on_gpu(one, s, backend()), "");
      for (int i = 0; i < one.seqlen_q; ++i)
        for (int h = 0; h < one.heads_q; ++h)
          for (int c = 0; c < one.head_dim_v; ++c)
            ASSERT_EQ(s.o.at({0, i, h, c}), a.o.at({q_row + i, h, c})) << "sequence " << b << " row " << i;
      q_row += packed.q_lens[b];
      k_row += packed.k_lens[b];
    }
  });
}

// A skewed varlen batch (many short sequences, one long, empty ones, more keys than queries)
// runs longest first on Hopper (core/work_order.hpp): checked against the reference, and bit for
// bit against each sequence run alone as a one-sequence varlen batch (grid order), under every
// mask kind: the order changes which block computes an item, never how.
TEST_P(PrefillGpu, VarlenLongestFirstMatchesGridOrderBitExactly) {
  for_each_built_head_dims({HeadDims{64, 64}, HeadDims{128, 128}}, [&](HeadDims hd, Rng& rng) {
    for (const Mask mask : {Mask::causal(), Mask::none(), Mask::window(200, 0)}) {
      ProblemSpec packed = base_spec(DType::bf16, hd.d, hd.dv, 0, 0);
      packed.varlen_q = true;
      packed.kv = KvLayout::varlen;
      packed.q_lens = {100, 3, 0, 100, 1100, 1, 257, 100, 64, 100};
      packed.k_lens = {100, 40, 7, 300, 1100, 1, 257, 0, 64, 612};
      packed.batch = static_cast<int>(packed.q_lens.size());
      packed.mask = mask;
      SCOPED_TRACE(packed.describe());
      check_spec(packed, backend(), 1500);
      AttentionTensors a = make_tensors(packed, rng);
      ASSERT_EQ(run_on_gpu(packed, a, backend()), "");
      std::int64_t q_row = 0, k_row = 0;
      for (int b = 0; b < packed.batch; ++b) {
        ProblemSpec one = packed;
        one.batch = 1;
        one.q_lens = {packed.q_lens[b]};
        one.k_lens = {packed.k_lens[b]};
        Rng rng2(rng.seed() + b);
        AttentionTensors s = make_tensors(one, rng2);
        for (int i = 0; i < one.q_lens[0]; ++i)
          for (int h = 0; h < one.heads_q; ++h)
            for (int c = 0; c < one.head_dim; ++c) s.q.set(s.q.offset({i, h, c}), a.q.at({q_row + i, h, c}));
        for (int j = 0; j < one.k_lens[0]; ++j)
          for (int h = 0; h < one.heads_kv; ++h) {
            for (int c = 0; c < one.head_dim; ++c) s.k.set(s.k.offset({j, h, c}), a.k.at({k_row + j, h, c}));
            for (int c = 0; c < one.head_dim_v; ++c) s.v.set(s.v.offset({j, h, c}), a.v.at({k_row + j, h, c}));
          }
        ASSERT_EQ(run_on_gpu(one, s, backend()), "");
        for (int i = 0; i < one.q_lens[0]; ++i)
          for (int h = 0; h < one.heads_q; ++h)
            for (int c = 0; c < one.head_dim_v; ++c)
              ASSERT_EQ(s.o.at({i, h, c}), a.o.at({q_row + i, h, c})) << "sequence " << b << " row " << i;
        q_row += packed.q_lens[b];
        k_row += packed.k_lens[b];
      }
    }
  });
}

// A self-attention varlen batch (one cu_seqlens for queries and keys) of short items runs on
// Hopper's persistent grid, walking the longest-first order table (D 96 and 128, where the walk's
// rows are the block's; the other head dims keep a block per item): against the reference, and
// bit for bit (O and LSE, every element) against the same batch passed its own cu_seqlens_k,
// which keeps a block per item. Groups of 1 and 4 (packed rows), lengths that end in short
// blocks, empty and one-token sequences, skewed and alike, every mask kind; under
// FLASHBUF_PREFILL_GRID=3 the walk's three blocks take many items each.
TEST_P(PrefillGpu, VarlenSelfAttentionWalkMatchesBlockPerItemBitExactly) {
  if (backend() != Backend::sm90) GTEST_SKIP() << "the persistent grid is the Hopper kernel's";
  const std::vector<std::vector<int>> batches = {{513, 1, 0, 37, 130, 50, 128, 129, 300}, {130, 129, 131, 127}};
  for_each_built_head_dims(
      {HeadDims{64, 64}, HeadDims{96, 96}, HeadDims{128, 128}, HeadDims{256, 256}}, [&](HeadDims hd, Rng& rng) {
        for (const int group : {1, 4})
          for (const auto& lens : batches)
            for (const Mask mask : {Mask::causal(), Mask::none(), Mask::window(100, 0)}) {
              ProblemSpec walk = varlen_spec(hd.d, hd.dv, group, lens, lens, mask);
              walk.shared_cu_seqlens = true;
              SCOPED_TRACE(walk.describe());
              check_spec(walk, backend(), 3000);
              ProblemSpec blocks = walk;
              blocks.shared_cu_seqlens = false;
              const std::uint64_t seed = rng.seed() + 11;
              Rng r1(seed), r2(seed);
              AttentionTensors a = make_tensors(walk, r1), b = make_tensors(blocks, r2);
              const bool walks = hd.d == 96 || hd.d == 128;  // the head dims whose walk has the block's rows
              ASSERT_EQ(run_on_gpu_noting_grid(walk, a, backend()),
                        walks ? detail::PrefillGrid::persistent_walk : detail::PrefillGrid::block_per_item);
              ASSERT_EQ(run_on_gpu_noting_grid(blocks, b, backend()), detail::PrefillGrid::block_per_item);
              for (const auto& [x, y, name] : {std::tuple{&a.o, &b.o, "O"}, std::tuple{&a.lse, &b.lse, "LSE"}})
                for (std::int64_t i = 0; i < x->numel(); ++i)
                  ASSERT_EQ(x->get(x->logical_to_storage(i)), y->get(y->logical_to_storage(i)))
                      << name << " element " << i;
            }
      });
}

// Varlen GQA launches on Hopper pack a K/V head's query heads into one block's rows
// (core/gqa_packing.hpp). Groups of 4 and 8 (base_spec's 2 runs in the tests above), every
// Q-copy shape (D 64, 96, 128, 192/128, 256), lengths that end in short blocks, rows without
// keys, skewed (longest first) and alike (grid order), every mask kind: against the reference
// (O and LSE), and bit for bit (O and LSE) against each sequence run alone, unpacked. The
// single runs pass seqlens_k and keep a block per item (the grid knob's per_block), so they take
// the packed run's key tiles (the persistent grid's 64-key tiles above D 128 would round
// differently).
TEST_P(PrefillGpu, VarlenPackedGroupsMatchReferenceAndSingleSequences) {
  if (backend() != Backend::sm90) GTEST_SKIP() << "GQA packing is the Hopper kernel's";
  const std::vector<std::pair<std::vector<int>, std::vector<int>>> batches = {
      {{513, 1, 0, 37, 130, 50}, {513, 40, 9, 300, 130, 20}},  // skewed: longest first
      {{130, 129, 131}, {131, 129, 200}}};                     // alike: grid order
  for_each_built_head_dims(
      {HeadDims{64, 64}, HeadDims{96, 96}, HeadDims{128, 128}, HeadDims{192, 128}, HeadDims{256, 256}},
      [&](HeadDims hd, Rng& rng) {
        for (const int group : {4, 8})
          for (const auto& [q_lens, k_lens] : batches)
            for (const Mask mask : {Mask::causal(), Mask::none(), Mask::window(100, 0)}) {
              ProblemSpec packed = varlen_spec(hd.d, hd.dv, group, q_lens, k_lens, mask);
              SCOPED_TRACE(packed.describe());
              std::int64_t total_q = 0;
              int max_q = 0;
              for (const int len : q_lens) total_q += len, max_q = std::max(max_q, len);
              const int block_m = 64 * prefill_sm90_tile(hd.d, hd.dv).consumers;  // a block per item
              ASSERT_EQ(gqa_pack_shift(group, true, total_q, max_q, block_m), group == 4 ? 2 : 3)
                  << "this case is not packed";
              check_spec(packed, backend(), 3000);
              AttentionTensors a = make_tensors(packed, rng);
              ASSERT_EQ(run_on_gpu(packed, a, backend()), "");
              std::int64_t q_row = 0, k_row = 0;
              for (int b = 0; b < packed.batch; ++b) {
                if (packed.q_lens[b] > 0 && packed.k_lens[b] > 0) {
                  ProblemSpec one = base_spec(DType::bf16, hd.d, hd.dv, packed.q_lens[b], packed.k_lens[b]);
                  one.batch = 1;
                  one.heads_q = packed.heads_q;
                  one.heads_kv = packed.heads_kv;
                  one.use_seqlens_k = true;
                  one.k_lens = {packed.k_lens[b]};
                  one.mask = mask;
                  Rng rng2(rng.seed() + b);
                  AttentionTensors s = make_tensors(one, rng2);
                  reference::copy_varlen_sequence(a, q_row, k_row, one, s);
                  ASSERT_EQ(run_on_gpu_per_block(one, s, backend()), detail::PrefillGrid::block_per_item);
                  for (int i = 0; i < one.seqlen_q; ++i)
                    for (int h = 0; h < one.heads_q; ++h) {
                      for (int c = 0; c < one.head_dim_v; ++c)
                        ASSERT_EQ(s.o.at({0, i, h, c}), a.o.at({q_row + i, h, c}))
                            << "sequence " << b << " row " << i << " head " << h;
                      ASSERT_EQ(s.lse.at({0, h, i}), a.lse.at({h, q_row + i}))
                          << "LSE: sequence " << b << " row " << i << " head " << h;
                    }
                }
                q_row += packed.q_lens[b];
                k_row += packed.k_lens[b];
              }
            }
      });
}

// Rows that see no key: O = 0 and LSE = -inf, never NaN (window entirely in the future).
TEST_P(PrefillGpu, RowsWithoutKeysGiveZeroAndMinusInf) {
  ProblemSpec s = base_spec(DType::bf16, 64, 64, 300, 100);  // causal, Sq > Sk: early rows see nothing
  s.mask = Mask::causal();
  check_spec(s, backend());
}

// Scores that grow along the keys: K row r scaled by 1 + r / growth, so each row's max rises
// tile after tile.
std::function<void(AttentionTensors&)> keys_growing_along_rows(const ProblemSpec& s, double growth) {
  return [s, growth](AttentionTensors& t) {
    for (std::int64_t b = 0; b < s.batch; ++b)
      for (std::int64_t r = 0; r < s.seqlen_k; ++r)
        for (int h = 0; h < s.heads_kv; ++h)
          for (int c = 0; c < s.head_dim; ++c) {
            const std::int64_t at = t.k.offset({b, r, h, c});
            t.k.set(at, t.k.get(at) * (1.0 + r / growth));
          }
  };
}

// Each row's max rises tile after tile (700 keys: 6 to 9 tiles), by more than 2^8 per tile at
// growth 40 (large O corrections every tile, rows nearly one-hot: the dominant P must be the
// same in O's numerator and denominator, or fp16 O errs twice its error), by less at 400. Both
// kernels, D 64 / 128 / 256, fp16 and bf16, no mask and causal.
TEST_P(PrefillGpu, ScoresGrowingAcrossTiles) {
  for (const HeadDims hd : {HeadDims{64, 64}, HeadDims{128, 128}, HeadDims{256, 256}}) {
    for (const DType dtype : {DType::bf16, DType::fp16}) {
      if (!detail::prefill_instantiated(dtype, hd.d, hd.dv)) continue;
      for (const double growth : {40.0, 400.0}) {
        ProblemSpec s = base_spec(dtype, hd.d, hd.dv, 70, 700);
        s.mask = growth < 100 ? Mask::none() : Mask::causal();
        check_spec(s, backend(), 300, keys_growing_along_rows(s, growth));
      }
    }
  }
}

// Nearly one-hot rows (scores growing by more than 2^8 a tile, as above) at the size where a
// softmax whose exponent base trailed the max by up to 2^8 failed (fp16 D 64: O's error 0.0035
// against the bound 0.0026): a row's dominant P is then not exactly 1, and P V takes it rounded
// to 16 bits. The Hopper kernel keeps each row's max where the widest head dim is
// above 128 (prefill_sm90_max_slack_log2), and O's denominator takes the dominant P as rounded
// (OnlineSoftmax::o_denominator). fp16 and bf16, D 64 (exact max), D 192 / Dv 128 and D 256
// (kept max).
TEST_P(PrefillGpu, NearlyOneHotRowsUnderAKeptMax) {
  for (const HeadDims hd : {HeadDims{64, 64}, HeadDims{192, 128}, HeadDims{256, 256}}) {
    for (const DType dtype : {DType::fp16, DType::bf16}) {
      if (!detail::prefill_instantiated(dtype, hd.d, hd.dv)) continue;
      ProblemSpec s = base_spec(dtype, hd.d, hd.dv, 150, 1100);
      check_spec(s, backend(), 300, keys_growing_along_rows(s, 40.0));
    }
  }
}

// More items (query block, head, sequence) than one wave of blocks: batch-form problems with
// seqlen_q <= seqlen_k and short items (D 64: any) run the Hopper kernel on a persistent grid,
// each block walking several items in alternating order, with the next item's first S under
// the current one's last P V and epilogue (prefill_sm90_persistent.cuh; D 256 with one Q slot).
// Odd lengths, every mask, GQA, softcap on one; seqlen_q > seqlen_k (query blocks without keys)
// keeps a block per item. (FLASHBUF_PREFILL_GRID=3 runs every test's batch-form problems on
// three blocks.)
TEST_P(PrefillGpu, ManyItemsPersistentGrid) {
  const std::pair<int, int> sizes[] = {{300, 500}, {500, 500}, {700, 300}};
  for (const HeadDims hd : {HeadDims{64, 64}, HeadDims{96, 96}, HeadDims{128, 128}, HeadDims{256, 256}}) {
    if (!instantiated(DType::bf16, hd)) continue;
    for (int m = 0; m < 3; ++m) {
      ProblemSpec s = base_spec(DType::bf16, hd.d, hd.dv, sizes[m].first, sizes[m].second);
      s.batch = 8;
      s.heads_q = 8;
      s.heads_kv = 2;
      s.softcap = m == 1 ? 20.0f : 0.0f;
      for (int mask = 0; mask < 3; ++mask) {
        s.mask = rotating_mask(mask);
        detail::last_prefill_grid = detail::PrefillGrid::none;
        check_spec(s, backend(), 300);
        if (backend() == Backend::sm90)
          EXPECT_EQ(detail::last_prefill_grid, s.seqlen_q <= s.seqlen_k ? detail::PrefillGrid::persistent_walk
                                                                         : detail::PrefillGrid::block_per_item)
              << s.describe();
      }
    }
  }
}

// A block per query block whose last block leaves a consumer warpgroup no row (its 64 rows all
// past the sequence's end): that consumer only keeps the rings' and the issue turns' pace
// (PrefillSm90::pace_tiles) while the others compute. Two consumers over 128 rows: sequences of
// 300 rows (the last block's 44 all the first consumer's) and 129, every mask, softcap on one;
// then varlen lengths whose last blocks leave the second consumer idle (300, 64, 1) or not (193),
// with K/V heads of their own (GQA would pack the rows), and the same with GQA's packed rows.
// (Three consumers with one or two idle: ThreeConsumersOverLongItems' 2000-, 8300- and 8190-row
// items.)
TEST_P(PrefillGpu, ConsumersWithoutRowsKeepThePace) {
  if (backend() != Backend::sm90) GTEST_SKIP() << "the Hopper kernel's consumer warpgroups";
  TuningOverrides per_block = tuning_overrides();
  per_block.prefill_grid = PrefillGridOverride::per_block;
  per_block.prefill_grid_blocks = 0;
  const ScopedTuning scope(per_block);
  const auto check_per_block = [&](const ProblemSpec& s) {
    detail::last_prefill_grid = detail::PrefillGrid::none;
    check_spec(s, backend());
    EXPECT_EQ(detail::last_prefill_grid, detail::PrefillGrid::block_per_item) << s.describe();
  };
  int checked = 0;
  for (const HeadDims hd : {HeadDims{128, 128}, HeadDims{256, 256}}) {
    if (!instantiated(DType::bf16, hd)) continue;
    ++checked;
    for (int m = 0; m < 3; ++m) {
      ProblemSpec s = base_spec(DType::bf16, hd.d, hd.dv, m == 1 ? 129 : 300, 700);
      s.softcap = m == 2 ? 20.0f : 0.0f;
      s.mask = rotating_mask(m);
      check_per_block(s);
      ProblemSpec v = s;
      v.batch = 4;
      v.varlen_q = true;
      v.kv = KvLayout::varlen;
      v.q_lens = {300, 64, 193, 1};
      v.k_lens = {700, 500, 300, 900};
      v.heads_q = v.heads_kv = 2;
      check_per_block(v);
      v.heads_q = 4;
      check_per_block(v);
    }
  }
  if (checked == 0) GTEST_SKIP() << "bf16 D 128 and D 256 not in FLASHBUF_INSTANTIATIONS";
}

// D 64 over long items (unmasked >= 16 key tiles, causal >= 32), in >= 4 waves of items: three
// consumers over 192-row items, a block each (three_consumers_pay; 528-1408 items on 132 SMs). A
// partial last item, seqlen_q < seqlen_k, GQA, softcap on one, both dtypes, LSE; rows sampled for
// the float64 reference. (On sm80 the unmasked problems run the mma.sync kernel.)
TEST_P(PrefillGpu, ThreeConsumersOverLongItems) {
  for (const DType dtype : {DType::bf16, DType::fp16}) {
    if (!instantiated(dtype, HeadDims{64, 64})) continue;
    for (const auto& [sq, sk] : {std::pair{2111, 2111}, std::pair{2000, 3001}}) {
      ProblemSpec s = base_spec(dtype, 64, 64, sq, sk);
      s.batch = 4;
      s.heads_q = 32;
      s.heads_kv = 8;
      s.softcap = sq == 2000 ? 30.0f : 0.0f;
      check_spec(s, backend(), 600);
    }
    // Hopper: causal items (rows sampled; no mma.sync twin).
    if (backend() != Backend::sm90) continue;
    // Causal S 8300: 44 items a head, exactly 4 waves on 132 SMs (more SMs: two consumers).
    ProblemSpec c = base_spec(dtype, 64, 64, 8300, 8300);
    c.batch = 1;
    c.heads_q = 12;
    c.heads_kv = 4;
    c.mask = Mask::causal();
    check_spec(c, backend(), 300);
    // 43 items a head, a right bound alone.
    ProblemSpec w = base_spec(dtype, 64, 64, 8190, 8190);
    w.heads_q = 16;
    w.heads_kv = 4;
    w.mask = Mask::window(-1, 700);
    check_spec(w, backend(), 300);
  }
}

// Small cases for compute-sanitizer (memcheck, racecheck, synccheck): the script filters on
// the name.
TEST_P(PrefillGpu, SanitizerSmallCases) {
  std::vector<ProblemSpec> cases;
  ProblemSpec s = base_spec(DType::bf16, 64, 64, 70, 130);
  s.mask = Mask::causal();
  cases.push_back(s);
  ProblemSpec w = base_spec(DType::bf16, 128, 128, 150, 200);  // two consumers; persistent grid with a knob
  w.mask = Mask::window(60, 0);
  cases.push_back(w);
  ProblemSpec p = base_spec(DType::fp16, 128, 128, 33, 0);
  p.kv = KvLayout::paged;
  p.page_size = 16;
  p.k_lens = {50, 90};
  cases.push_back(p);
  // Hopper: one Q slot, O staged apart; mma.sync: the straight-line tile bodies per block.
  ProblemSpec d = base_spec(DType::bf16, 256, 256, 150, 200);
  d.mask = Mask::causal();
  cases.push_back(d);
  // D 64 causal, 1300 queries over 6000 keys: two heads of 7 items of 192 rows, each of >= 32 key
  // tiles: the persistent grid's two consumers, or three, a block each, where three_consumers_pay
  // (not where the grid knob forces the persistent grid, as FLASHBUF_PREFILL_GRID=2 does).
  ProblemSpec c = base_spec(DType::bf16, 64, 64, 1300, 6000);
  c.batch = 1;
  c.heads_q = 2;
  c.heads_kv = 1;
  c.mask = Mask::causal();
  cases.push_back(c);
  // A self-attention varlen batch, packed 2 query heads a K/V head (Hopper: the persistent
  // varlen walk, Q by TMA, gathered last tiles, O by a TMA store for the block inside its
  // sequence and row copies for the others), sequences that end in short blocks and an empty one.
  ProblemSpec v = varlen_spec(128, 128, 2, {70, 0, 130, 1}, {70, 0, 130, 1}, Mask::causal());
  v.shared_cu_seqlens = true;
  cases.push_back(v);
  // The cases this build has run; the test is skipped only if it has none (a sanitizer run's
  // log then says whether anything was checked, where a skip in the middle marked it skipped).
  int run = 0;
  for (const ProblemSpec& c : cases) {
    if (!detail::prefill_instantiated(c.dtype, c.head_dim, c.head_dim_v)) continue;
    check_spec(c, backend(), c.seqlen_k > 1000 ? 400 : 1500);
    ++run;
  }
  if (run == 0) GTEST_SKIP() << "none of the small cases' head dims is instantiated in this build";
}

INSTANTIATE_TEST_SUITE_P(Kernels, PrefillGpu, ::testing::Values(Backend::sm80, Backend::sm90), backend_param_name);

// The two GPU kernels compute the same function: compare them on one problem directly.
TEST(PrefillKernels, HopperMatchesMmaSyncPath) {
  FLASHBUF_REQUIRE_GPU();
  if (!detail::sm90_prefill_available(0)) GTEST_SKIP() << "no Hopper kernel here";
  if (!detail::prefill_instantiated(DType::bf16, 128, 128)) GTEST_SKIP() << "bf16 128 / 128 is not instantiated in this build";
  ProblemSpec s = base_spec(DType::bf16, 128, 128, 300, 517);
  s.mask = Mask::causal();
  Rng rng(Rng::fresh_seed());
  SCOPED_TRACE("seed " + std::to_string(rng.seed()));
  AttentionTensors a = make_tensors(s, rng);
  AttentionTensors b = a;
  ASSERT_EQ(run_on_gpu(s, a, Backend::sm80), "");
  ASSERT_EQ(run_on_gpu(s, b, Backend::sm90), "");
  double worst = 0;
  for (std::int64_t i = 0; i < a.o.numel(); ++i)
    worst = std::max(worst, std::abs(a.o.get(a.o.logical_to_storage(i)) - b.o.get(b.o.logical_to_storage(i))));
  EXPECT_LT(worst, 2e-2) << "sm80 and sm90 outputs differ by more than bf16 rounding of P allows";
}

}  // namespace
}  // namespace flashbuf::reference
