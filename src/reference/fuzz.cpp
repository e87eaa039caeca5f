// Reference/test utilities: the fuzz campaign's cases (fuzz.hpp).
#include "reference/fuzz.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace flashbuf::reference {
namespace {

// Page sizes from 1 to 256: powers of two and not, around the kernels' 64- and 128-key tiles.
constexpr int kPageSizes[] = {1, 2, 3, 5, 7, 8, 12, 16, 17, 24, 31, 32, 40, 48, 63, 64, 65, 100, 127, 128, 129, 200, 255, 256};

template <class T>
const T& pick(Rng& rng, const std::vector<T>& from) {
  return from[static_cast<std::size_t>(rng.uniform_int(0, static_cast<int>(from.size()) - 1))];
}

// A length in [lo, hi], zero with probability p_zero.
int length(Rng& rng, int lo, int hi, double p_zero = 0.0) {
  if (p_zero > 0 && rng.coin(p_zero)) return 0;
  return rng.uniform_int(lo, hi);
}

Mask random_mask(Rng& rng, int max_k) {
  switch (rng.uniform_int(0, 3)) {
    case 0: return Mask::none();
    case 1: return Mask::causal();
    default: {
      const int left = rng.coin(0.25) ? -1 : rng.uniform_int(0, max_k);
      const int right = rng.coin(0.35) ? -1 : rng.uniform_int(0, max_k / 2);
      return Mask::window(left, left < 0 && right < 0 ? 0 : right);
    }
  }
}

void random_heads(Rng& rng, const FuzzLimits& limits, ProblemSpec& s) {
  s.heads_kv = rng.uniform_int(1, limits.max_heads_kv);
  s.heads_q = s.heads_kv * rng.uniform_int(1, 8);  // GQA ratio 1-8
}

void random_scores(Rng& rng, ProblemSpec& s) {
  s.softcap = rng.coin(0.25) ? static_cast<float>(rng.uniform(2.0, 50.0)) : 0.0f;
  s.softmax_scale = rng.coin(0.15) ? static_cast<float>(rng.uniform(0.02, 0.3)) : 0.0f;
  s.input_stddev = rng.coin(0.15) ? 2.0 : 1.0;
  // Row pads keep 16-byte alignment of every row (8 elements of 16 bits).
  s.pad = rng.coin(0.2) ? 8 * rng.uniform_int(1, 3) : 0;
}

}  // namespace

const char* fuzz_entry_name(FuzzEntry entry) {
  switch (entry) {
    case FuzzEntry::prefill: return "prefill";
    case FuzzEntry::decode: return "decode";
    case FuzzEntry::merge: return "merge_states";
  }
  return "?";
}

std::string FuzzCase::describe() const {
  std::ostringstream s;
  s << "fuzz case " << index << " (seed " << seed << "): " << fuzz_entry_name(entry) << " " << spec.describe();
  if (nan_in_unused_rows) s << "; NaN in unused K/V rows";
  if (entry == FuzzEntry::merge) {
    s << "; " << merge_parts() << " parts at keys";
    for (int b : merge_bounds) s << " " << b;
  }
  return s.str();
}

std::uint64_t fuzz_base_seed(const char* replay) {
  if (replay != nullptr && *replay != '\0') return std::strtoull(replay, nullptr, 0);
  return Rng::fresh_seed();
}

std::uint64_t fuzz_case_seed(std::uint64_t base, int index) {
  std::uint64_t z = base + 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

FuzzCase make_fuzz_case(int index, std::uint64_t seed, const FuzzLimits& limits) {
  if (limits.head_dims.empty() || limits.dtypes.empty()) throw std::invalid_argument("FuzzLimits: no head dims or dtypes");
  FuzzCase c;
  c.index = index;
  c.seed = seed;
  Rng rng(seed);
  // Of every 8 cases: 6 prefill, 1 decode, 1 merge (decode needs its head dims built).
  const int slot = index % 8;
  c.entry = slot == 6 && !limits.decode_head_dims.empty() ? FuzzEntry::decode
            : slot == 7                                   ? FuzzEntry::merge
                                                          : FuzzEntry::prefill;
  ProblemSpec& s = c.spec;
  s.dtype = pick(rng, limits.dtypes);
  s.batch = rng.uniform_int(1, limits.max_batch);
  random_heads(rng, limits, s);
  random_scores(rng, s);
  s.lse = rng.coin(0.8);
  const int turn = index + index / 8;  // walks the head dims across entries and blocks of 8

  if (c.entry == FuzzEntry::decode) {
    const int n = static_cast<int>(limits.decode_head_dims.size());
    s.head_dim = s.head_dim_v = limits.decode_head_dims[static_cast<std::size_t>(turn % n)];
    s.seqlen_q = rng.uniform_int(1, 16);
    s.k_lens.resize(s.batch);
    for (int& l : s.k_lens) l = length(rng, 1, limits.max_decode_keys, 0.1);
    if (rng.coin(0.5)) {
      s.kv = KvLayout::paged;
      s.page_size = kPageSizes[rng.uniform_int(0, int(std::size(kPageSizes)) - 1)];
      s.spare_pages = rng.uniform_int(1, 4);
    } else {
      s.kv = KvLayout::batch;
      s.use_seqlens_k = true;
      s.seqlen_k = *std::max_element(s.k_lens.begin(), s.k_lens.end()) + rng.uniform_int(0, 9);
    }
    s.mask = random_mask(rng, limits.max_decode_keys);
    c.nan_in_unused_rows = rng.coin(0.6);
    return c;
  }

  const auto& hd = limits.head_dims[static_cast<std::size_t>(turn % int(limits.head_dims.size()))];
  s.head_dim = hd.first;
  s.head_dim_v = hd.second;

  if (c.entry == FuzzEntry::merge) {
    // Batch form without a mask: each part is attention over a slice of the keys.
    s.seqlen_q = rng.uniform_int(1, limits.max_seqlen_q);
    s.seqlen_k = rng.uniform_int(1, limits.max_seqlen_k);
    s.lse = true;
    const int parts = rng.uniform_int(1, 5);
    c.merge_bounds = {0, s.seqlen_k};
    for (int p = 1; p < parts; ++p) c.merge_bounds.push_back(rng.uniform_int(0, s.seqlen_k));
    std::sort(c.merge_bounds.begin(), c.merge_bounds.end());
    return c;
  }

  s.varlen_q = rng.coin(0.3);
  const int layout = rng.uniform_int(0, 99);
  s.kv = layout < 50 ? KvLayout::batch : layout < 70 ? KvLayout::varlen : KvLayout::paged;
  s.use_seqlens_k = s.kv == KvLayout::batch && layout >= 35;
  if (s.varlen_q) {
    s.q_lens.resize(s.batch);
    for (int& l : s.q_lens) l = length(rng, 1, limits.max_seqlen_q, 0.15);
    if (std::all_of(s.q_lens.begin(), s.q_lens.end(), [](int l) { return l == 0; })) s.q_lens[0] = 1;
  } else {
    s.seqlen_q = rng.uniform_int(1, limits.max_seqlen_q);
  }
  if (s.kv == KvLayout::batch && !s.use_seqlens_k) {
    s.seqlen_k = rng.uniform_int(1, limits.max_seqlen_k);
  } else {
    s.k_lens.resize(s.batch);
    for (int& l : s.k_lens) l = length(rng, 1, limits.max_seqlen_k, 0.15);
    if (s.use_seqlens_k) s.seqlen_k = *std::max_element(s.k_lens.begin(), s.k_lens.end()) + rng.uniform_int(0, 17);
  }
  if (s.varlen_q && s.kv == KvLayout::varlen && rng.coin(0.5)) {  // self-attention: one cu_seqlens
    s.k_lens = s.q_lens;
    s.shared_cu_seqlens = true;
  }
  if (s.kv == KvLayout::paged) {
    s.page_size = kPageSizes[rng.uniform_int(0, int(std::size(kPageSizes)) - 1)];
    s.spare_pages = rng.uniform_int(1, 4);
  }
  s.mask = random_mask(rng, limits.max_seqlen_k);
  c.nan_in_unused_rows = (s.kv == KvLayout::paged || s.use_seqlens_k) && rng.coin(0.6);
  return c;
}

void poison_kv_row(const ProblemSpec& s, AttentionTensors& t, std::int64_t outer, std::int64_t row) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int h = 0; h < s.heads_kv; ++h) {
    for (int c = 0; c < s.head_dim; ++c) t.k.set(t.k.offset({outer, row, h, c}), nan);
    for (int c = 0; c < s.head_dim_v; ++c) t.v.set(t.v.offset({outer, row, h, c}), nan);
  }
}

void poison_unused_kv_rows(const ProblemSpec& s, AttentionTensors& t) {
  if (s.kv == KvLayout::batch && s.use_seqlens_k) {
    for (int b = 0; b < s.batch; ++b)
      for (int j = s.k_len(b); j < s.seqlen_k; ++j) poison_kv_row(s, t, b, j);
    return;
  }
  if (s.kv != KvLayout::paged) return;
  const int page = s.page_size, cols = s.max_pages();
  const std::int64_t pool = t.k.shape()[0];
  std::int32_t* table = t.page_table.i32();
  std::vector<char> is_key(static_cast<std::size_t>(pool * page), 0);
  for (int b = 0; b < s.batch; ++b)
    for (int j = 0; j < s.k_len(b); ++j) is_key[std::size_t(table[std::int64_t(b) * cols + j / page]) * page + j % page] = 1;
  std::int64_t keyless_page = -1;
  for (std::int64_t pg = 0; pg < pool && keyless_page < 0; ++pg)
    if (std::none_of(&is_key[pg * page], &is_key[pg * page] + page, [](char k) { return k != 0; })) keyless_page = pg;
  if (keyless_page < 0) throw std::invalid_argument("poison_unused_kv_rows: the spec needs spare_pages >= 1");
  for (int b = 0; b < s.batch; ++b)
    for (int j = s.pages_per_seq(b); j < cols; ++j) table[std::int64_t(b) * cols + j] = static_cast<std::int32_t>(keyless_page);
  for (std::int64_t pg = 0; pg < pool; ++pg)
    for (int r = 0; r < page; ++r)
      if (!is_key[pg * page + r]) poison_kv_row(s, t, pg, r);
}

}  // namespace flashbuf::reference
