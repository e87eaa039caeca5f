// Host tests: append_kv on the CPU backend against the same writes made here one row at a time,
// for contiguous, indexed (cache_batch_idx) and paged caches with strided views, and every
// refusal naming its argument with nothing written.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "flashbuf/flashbuf.hpp"

namespace {

using flashbuf::AppendKvArgs;
using flashbuf::ArgumentError;
using flashbuf::DType;
using flashbuf::TensorView;

// A float32 tensor of random values, viewed with its rows `pad` elements apart in the last
// dimension's parent (a strided view, as a slice of a wider buffer).
struct Buffer {
  std::vector<float> data;
  TensorView view;
  Buffer(std::initializer_list<std::int64_t> shape, std::uint32_t seed, std::int64_t pad = 0) {
    std::vector<std::int64_t> s(shape);
    const std::int64_t row = s[3] + pad;
    data.resize(static_cast<std::size_t>(s[0] * s[1] * s[2] * row));
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    for (float& x : data) x = normal(rng);
    view = flashbuf::make_view(data.data(), DType::fp32, shape);
    view.stride[2] = row, view.stride[1] = s[2] * row, view.stride[0] = s[1] * s[2] * row;
  }
  float& at(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
    return data[static_cast<std::size_t>(a * view.stride[0] + b * view.stride[1] + c * view.stride[2] + d)];
  }
};

struct Append : ::testing::Test {
  // Two sequences of 3 new tokens, 2 KV heads, D 5, Dv 3.
  Buffer k{{2, 3, 2, 5}, 1}, v{{2, 3, 2, 3}, 2, /*pad=*/2};
  std::vector<std::int32_t> lens{4, 9};
  AppendKvArgs args;

  // The caches after the append, written here a row at a time: expected[(first, second)].
  void expect_rows_written(Buffer& k_cache, Buffer& v_cache, const std::function<std::pair<int, int>(int, int)>& place,
                           const std::vector<float>& k_before, const std::vector<float>& v_before) {
    std::vector<float> k_want = k_before, v_want = v_before;
    Buffer k_expected = k_cache, v_expected = v_cache;
    k_expected.data = k_want, v_expected.data = v_want;
    for (int b = 0; b < 2; ++b) {
      for (int i = 0; i < 3; ++i) {
        const auto [first, second] = place(b, i);
        for (int h = 0; h < 2; ++h) {
          for (int e = 0; e < 5; ++e) k_expected.at(first, second, h, e) = k.at(b, i, h, e);
          for (int e = 0; e < 3; ++e) v_expected.at(first, second, h, e) = v.at(b, i, h, e);
        }
      }
    }
    EXPECT_EQ(k_cache.data, k_expected.data);
    EXPECT_EQ(v_cache.data, v_expected.data);
  }

  void expect_refused(const AppendKvArgs& a, const std::string& arg, const std::string& fragment,
                      const Buffer& k_cache, const Buffer& v_cache) {
    const std::vector<float> k_before = k_cache.data, v_before = v_cache.data;
    try {
      flashbuf::append_kv(a);
      ADD_FAILURE() << "no error; expected one for " << arg << " (" << fragment << ")";
    } catch (const ArgumentError& e) {
      EXPECT_EQ(e.argument(), arg) << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << "message: " << e.what();
    }
    EXPECT_EQ(k_cache.data, k_before) << arg << ": k_cache was written";
    EXPECT_EQ(v_cache.data, v_before) << arg << ": v_cache was written";
  }
};

TEST_F(Append, ContiguousAndIndexedCaches) {
  Buffer k_cache{{3, 12, 2, 5}, 3, /*pad=*/1}, v_cache{{3, 12, 2, 3}, 4};
  const std::vector<float> k_before = k_cache.data, v_before = v_cache.data;
  args.k_cache = k_cache.view, args.v_cache = v_cache.view, args.k = k.view, args.v = v.view;
  args.cache_seqlens = flashbuf::make_view(lens.data(), DType::int32, {2});
  std::vector<std::int32_t> rows{2, 0};
  args.cache_batch_idx = flashbuf::make_view(rows.data(), DType::int32, {2});
  EXPECT_EQ(flashbuf::append_kv(args), flashbuf::Backend::cpu);
  expect_rows_written(k_cache, v_cache, [&](int b, int i) { return std::pair{rows[b], lens[b] + i}; }, k_before,
                      v_before);

  k_cache.data = k_before, v_cache.data = v_before;
  args.cache_batch_idx = {};
  flashbuf::append_kv(args);
  expect_rows_written(k_cache, v_cache, [&](int b, int i) { return std::pair{b, lens[b] + i}; }, k_before, v_before);

  std::vector<std::int32_t> over{4, 10};  // 10 + 3 tokens overrun 12
  args.cache_seqlens.data = over.data();
  expect_refused(args, "cache_seqlens[1]", "appending 3 tokens at 10 leaves the cache of 12", k_cache, v_cache);
  over = {-1, 0};
  expect_refused(args, "cache_seqlens[0]", "appending 3 tokens at -1", k_cache, v_cache);
  args.cache_seqlens.data = lens.data();
  rows = {0, 3};
  args.cache_batch_idx = flashbuf::make_view(rows.data(), DType::int32, {2});
  expect_refused(args, "cache_batch_idx[1]", "row 3 is outside the cache's 3 sequences", k_cache, v_cache);
  AppendKvArgs bad = args;
  bad.k = k_cache.view;  // the cache as its own source
  bad.k.shape[0] = 2, bad.k.shape[1] = 3;
  expect_refused(bad, "k_cache", "shares memory with k", k_cache, v_cache);
  bad = args;
  bad.v.shape[3] = 4;
  expect_refused(bad, "v", "expected shape (2, 3, 2, 3)", k_cache, v_cache);
  bad = args;
  bad.k_cache.stride[1] = 0;  // every position one row
  expect_refused(bad, "k_cache", "addresses some elements more than once", k_cache, v_cache);
}

TEST_F(Append, PagedCacheAcrossPages) {
  // Pages of 4 rows, 3 a sequence (capacity 12), shuffled in a pool of 7; a sliced table.
  Buffer k_cache{{7, 4, 2, 5}, 5}, v_cache{{7, 4, 2, 3}, 6, /*pad=*/3};
  const std::vector<float> k_before = k_cache.data, v_before = v_cache.data;
  std::vector<std::int32_t> wide{6, 2, 5, -1, -1, 1, 0, 3, -1, -1};  // rows of 5, 3 used
  args.k_cache = k_cache.view, args.v_cache = v_cache.view, args.k = k.view, args.v = v.view;
  args.cache_seqlens = flashbuf::make_view(lens.data(), DType::int32, {2});
  args.page_table = flashbuf::make_view(wide.data(), DType::int32, {2, 3});
  args.page_table.stride[0] = 5;
  flashbuf::append_kv(args);
  expect_rows_written(
      k_cache, v_cache,
      [&](int b, int i) { return std::pair{wide[b * 5 + (lens[b] + i) / 4], (lens[b] + i) % 4}; }, k_before,
      v_before);

  k_cache.data = k_before, v_cache.data = v_before;
  wide[5 + 2] = 7;  // a page sequence 1's tokens 11 reaches (positions 9..11 on its third page)
  expect_refused(args, "page_table[1][2]", "page index 7 where the append writes is outside the pool of 7",
                 k_cache, v_cache);
  wide[5 + 2] = 3;
  wide[0] = -5;  // sequence 0 writes positions 4..6: its second page only
  flashbuf::append_kv(args);
  std::vector<std::int32_t> rows{0, 0};
  AppendKvArgs bad = args;
  bad.cache_batch_idx = flashbuf::make_view(rows.data(), DType::int32, {2});
  expect_refused(bad, "cache_batch_idx", "cannot be combined with page_table", k_cache, v_cache);

  // Pages longer than attention and decode read (257 rows) are refused as they refuse them.
  Buffer k_long{{1, 257, 2, 5}, 9}, v_long{{1, 257, 2, 3}, 10};
  std::vector<std::int32_t> one_page{0, 0};
  AppendKvArgs long_pages = args;
  long_pages.k_cache = k_long.view, long_pages.v_cache = v_long.view;
  long_pages.page_table = flashbuf::make_view(one_page.data(), DType::int32, {2, 1});
  expect_refused(long_pages, "k_cache", "page size 257 (dimension 1 of paged k_cache) not supported", k_long, v_long);
}

// K and V taking turns in one buffer, as a (B, S, 2, H, D) pool split at dimension 2: their
// byte ranges overlap, their elements do not, so the append takes them; a sequence without a
// row, and one cache inside the other, are refused.
TEST_F(Append, CachesTakingTurnsInOneBuffer) {
  Buffer pool{{3, 12, 4, 5}, 9};  // heads 0-1 are K's, 2-3 V's
  const std::vector<float> before = pool.data;
  TensorView k_cache = pool.view, v_cache = pool.view;
  k_cache.shape[2] = v_cache.shape[2] = 2;
  v_cache.data = pool.data.data() + 2 * pool.view.stride[2];
  v_cache.shape[3] = 3;  // Dv 3 inside D 5's row
  args.k_cache = k_cache, args.v_cache = v_cache, args.k = k.view, args.v = v.view;
  args.cache_seqlens = flashbuf::make_view(lens.data(), DType::int32, {2});
  flashbuf::append_kv(args);
  Buffer want = pool;
  want.data = before;
  for (int b = 0; b < 2; ++b) {
    for (int i = 0; i < 3; ++i) {
      for (int h = 0; h < 2; ++h) {
        for (int e = 0; e < 5; ++e) want.at(b, lens[b] + i, h, e) = k.at(b, i, h, e);
        for (int e = 0; e < 3; ++e) want.at(b, lens[b] + i, 2 + h, e) = v.at(b, i, h, e);
      }
    }
  }
  EXPECT_EQ(pool.data, want.data);

  Buffer dummy{{1, 1, 1, 1}, 0};
  AppendKvArgs bad = args;
  bad.v_cache.data = pool.data.data() + 1;  // V's rows start inside K's
  expect_refused(bad, "k_cache", "shares memory with v_cache", pool, dummy);
  bad = args;
  bad.v_cache.data = bad.k_cache.data;  // one cache for both
  expect_refused(bad, "k_cache", "shares memory with v_cache", pool, dummy);
  bad = args;
  bad.k_cache.shape[0] = bad.v_cache.shape[0] = 1;  // two sequences, one cache row
  expect_refused(bad, "k", "batch 2 exceeds k_cache's 1 sequences", pool, dummy);
}

// The metadata scope (torch.compile's fake rule) checks shapes, dtypes and strides without any
// pointer; the full scope makes the run's checks, index contents included, and writes nothing.
TEST_F(Append, ChecksWithoutTheCopy) {
  Buffer k_cache{{2, 12, 2, 5}, 7}, v_cache{{2, 12, 2, 3}, 8};
  const std::vector<float> k_before = k_cache.data, v_before = v_cache.data;
  args.k_cache = k_cache.view, args.v_cache = v_cache.view, args.k = k.view, args.v = v.view;
  std::vector<std::int32_t> over{4, 10};  // 10 + 3 tokens overrun 12: only the full scope reads it
  args.cache_seqlens = flashbuf::make_view(over.data(), DType::int32, {2});
  AppendKvArgs described = args;
  for (TensorView* t : {&described.k_cache, &described.v_cache, &described.k, &described.v, &described.cache_seqlens}) {
    t->data = nullptr;
  }
  EXPECT_NO_THROW(flashbuf::check_append_kv(described, flashbuf::CheckScope::metadata));
  described.v.shape[1] = 4;
  try {
    flashbuf::check_append_kv(described, flashbuf::CheckScope::metadata);
    ADD_FAILURE() << "no error for v's shape";
  } catch (const ArgumentError& e) {
    EXPECT_EQ(e.argument(), "v") << e.what();
  }
  try {
    flashbuf::check_append_kv(args);
    ADD_FAILURE() << "no error for cache_seqlens[1]";
  } catch (const ArgumentError& e) {
    EXPECT_EQ(e.argument(), "cache_seqlens[1]") << e.what();
  }
  EXPECT_EQ(k_cache.data, k_before);
  EXPECT_EQ(v_cache.data, v_before);
}

}  // namespace
