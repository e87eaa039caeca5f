// CPU backend: exact attention, tiled flash-style (DESIGN.md, api layer). It serves every
// feature of the API — bf16/fp16/fp32, any head dims, masks, softcap, GQA, varlen, paged K/V,
// LSE — and is the engine of `flashbuf run` where no GPU is found.
//
// Work item = one tile of kTileRows "packed rows" of one (sequence, KV head). Packed row r is
// (query r / G, head r % G) with G = heads_q / heads_kv: the whole GQA group of a query sits in
// one tile, as the GPU decode packs it into the MMA's M dimension, so each K/V tile is
// converted once for G heads and a decode step (few queries) is a single tile per KV head.
// For each key tile of the tile's key range:
//     S = Q_scaled · Kᵀ          (fp32, Q pre-multiplied by softmax_scale·log2 e)
//     softcap, mask              (per element only on tiles the mask cuts)
//     online softmax in base 2   (flashbuf::SoftmaxState: running max and sum)
//     O = O·rescale + P·V        (fp32 accumulators)
// then O /= sum and LSE = ln(sum) + max·ln 2. Memory per worker is one tile's worth
// (Q, Kᵀ, V, S and O of a tile), whatever the sequence lengths.
//
// Numerics: P stays fp32 for P·V (the GPU kernels round it to the input dtype first). The
// CPU result is therefore at least as accurate as the kernels'; the tests bound both with the
// same rule (error <= 2 x the error of a naive same-precision implementation + atol).
//
// Loops are written so the compiler vectorises them without -ffast-math: the score tile is
// built as a sum of outer products (inner loop over keys, with K stored transposed) and P·V
// as a sum of scaled V rows (inner loop over the value dim); neither reassociates a sum.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "api/backends.hpp"
#include "cpu/element.hpp"
#include "cpu/parallel.hpp"
#include "flashbuf/core/mask.hpp"
#include "flashbuf/core/softmax_state.hpp"

namespace flashbuf::detail {
namespace {

// 64 x 64: Kᵀ and V tiles of head dim 128 are 32 KiB each in fp32, so the operand of each
// inner loop stays in L1/L2 while a tile row streams through it; 64 packed rows amortise a
// K/V tile conversion over enough rows to make it cheap.
constexpr int kTileRows = 64;
constexpr int kTileKeys = 64;

struct Scratch {
  std::vector<float> q;       // kTileRows x D, pre-scaled
  std::vector<float> kt;      // D x kTileKeys (transposed K tile)
  std::vector<float> v;       // kTileKeys x Dv
  std::vector<float> s;       // kTileRows x kTileKeys scores, then probabilities
  std::vector<float> acc;     // kTileRows x Dv output accumulators
  std::vector<SoftmaxState> state;  // kTileRows
  std::vector<int> query;     // packed row -> query index within the sequence
  std::vector<int> head;      // packed row -> query head
};

// Items of one sequence: heads_kv x ceil(Sq * G / kTileRows). Varlen batches differ per
// sequence, so items are numbered through a prefix sum over the batch.
struct ItemMap {
  std::vector<std::int64_t> first_item;  // size batch + 1

  explicit ItemMap(const AttentionProblem& p) : first_item(p.batch + 1, 0) {
    const int group = p.heads_q / p.heads_kv;
    for (int b = 0; b < p.batch; ++b) {
      const std::int64_t rows = static_cast<std::int64_t>(q_len(p, b)) * group;
      const std::int64_t tiles = (rows + kTileRows - 1) / kTileRows;
      first_item[b + 1] = first_item[b] + tiles * p.heads_kv;
    }
  }
  std::int64_t total() const { return first_item.back(); }
};

template <class E>
class TileRunner {
 public:
  using T = typename E::Storage;

  explicit TileRunner(const AttentionProblem& p) : p_(p), group_(p.heads_q / p.heads_kv) {
    if (p.softcap > 0.0f) {
      // s = softcap * tanh(x * scale / softcap), in base 2: multiply the tanh by softcap·log2 e.
      q_scale_ = p.softmax_scale / p.softcap;
      cap_scale_ = p.softcap * kLog2e;
    } else {
      q_scale_ = p.softmax_scale * kLog2e;
    }
  }

  Scratch make_scratch() const {
    Scratch s;
    s.q.resize(std::size_t(kTileRows) * p_.head_dim);
    s.kt.resize(std::size_t(p_.head_dim) * kTileKeys);
    s.v.resize(std::size_t(kTileKeys) * p_.head_dim_v);
    s.s.resize(std::size_t(kTileRows) * kTileKeys);
    s.acc.resize(std::size_t(kTileRows) * p_.head_dim_v);
    s.state.resize(kTileRows);
    s.query.resize(kTileRows);
    s.head.resize(kTileRows);
    return s;
  }

  // Runs tile `tile` of KV head `kv_head` of sequence `b`.
  void run(Scratch& sc, int b, int kv_head, int tile) const {
    const int D = p_.head_dim, Dv = p_.head_dim_v;
    const int seq_q = q_len(p_, b);
    const int seq_k = k_len(p_, b);
    const int row_begin = tile * kTileRows;
    const int rows = std::min(kTileRows, seq_q * group_ - row_begin);
    for (int r = 0; r < rows; ++r) {
      sc.query[r] = (row_begin + r) / group_;
      sc.head[r] = kv_head * group_ + (row_begin + r) % group_;
    }
    const int q_first = sc.query[0], q_last = sc.query[rows - 1];

    // Q tile, pre-scaled.
    const T* q = static_cast<const T*>(p_.q);
    for (int r = 0; r < rows; ++r) {
      const T* row = q + b * p_.q_batch_stride + std::int64_t(q_start(p_, b) + sc.query[r]) * p_.q_row_stride +
                     std::int64_t(sc.head[r]) * p_.q_head_stride;
      float* dst = &sc.q[std::size_t(r) * D];
      for (int d = 0; d < D; ++d) dst[d] = E::load(row[d]) * q_scale_;
    }
    std::fill(sc.acc.begin(), sc.acc.begin() + std::size_t(rows) * Dv, 0.0f);
    std::fill(sc.state.begin(), sc.state.begin() + rows, SoftmaxState{});

    const MaskParams mask{seq_q, seq_k, p_.window_left, p_.window_right};
    const KeyRange keys = key_range(mask, q_first, q_last + 1);
    for (int k0 = keys.begin; k0 < keys.end; k0 += kTileKeys) {
      const int n = std::min(kTileKeys, keys.end - k0);
      load_kv_tile(sc, b, kv_head, k0, n);
      scores(sc, rows, n);
      const bool full = tile_fully_visible(mask, q_first, q_last + 1, k0, k0 + n);
      for (int r = 0; r < rows; ++r) {
        float* s = &sc.s[std::size_t(r) * kTileKeys];
        if (p_.softcap > 0.0f) {
          for (int j = 0; j < n; ++j) s[j] = cap_scale_ * std::tanh(s[j]);
        }
        if (!full) {
          for (int j = 0; j < n; ++j) {
            if (!visible(mask, sc.query[r], k0 + j)) s[j] = kNegInf;
          }
        }
        softmax_and_accumulate(sc, r, n);
      }
    }
    write_outputs(sc, b, rows);
  }

 private:
  void load_kv_tile(Scratch& sc, int b, int kv_head, int k0, int n) const {
    const int D = p_.head_dim, Dv = p_.head_dim_v;
    const T* k = static_cast<const T*>(p_.k);
    const T* v = static_cast<const T*>(p_.v);
    for (int j = 0; j < n; ++j) {
      const T* krow = k + kv_offset(p_, b, k0 + j, kv_head, p_.k_batch_stride, p_.k_row_stride, p_.k_head_stride);
      for (int d = 0; d < D; ++d) sc.kt[std::size_t(d) * kTileKeys + j] = E::load(krow[d]);
      const T* vrow = v + kv_offset(p_, b, k0 + j, kv_head, p_.v_batch_stride, p_.v_row_stride, p_.v_head_stride);
      float* vdst = &sc.v[std::size_t(j) * Dv];
      for (int d = 0; d < Dv; ++d) vdst[d] = E::load(vrow[d]);
    }
    // Keys past n in a partial tile: zero, so the full-width score loop reads defined values.
    for (int d = 0; d < D && n < kTileKeys; ++d) {
      std::fill(&sc.kt[std::size_t(d) * kTileKeys + n], &sc.kt[std::size_t(d) * kTileKeys + kTileKeys], 0.0f);
    }
  }

  // S[r][j] = sum_d Q[r][d] * Kᵀ[d][j], as outer products over d.
  void scores(Scratch& sc, int rows, int /*n*/) const {
    const int D = p_.head_dim;
    for (int r = 0; r < rows; ++r) {
      float s[kTileKeys] = {};
      const float* qrow = &sc.q[std::size_t(r) * D];
      for (int d = 0; d < D; ++d) {
        const float qd = qrow[d];
        const float* kt = &sc.kt[std::size_t(d) * kTileKeys];
        for (int j = 0; j < kTileKeys; ++j) s[j] += qd * kt[j];
      }
      std::copy(s, s + kTileKeys, &sc.s[std::size_t(r) * kTileKeys]);
    }
  }

  // One row of one key tile through the online softmax, then acc = acc * rescale + P·V.
  void softmax_and_accumulate(Scratch& sc, int r, int n) const {
    const int Dv = p_.head_dim_v;
    float* s = &sc.s[std::size_t(r) * kTileKeys];
    SoftmaxState& st = sc.state[r];
    float tile_max = kNegInf;
    for (int j = 0; j < n; ++j) tile_max = std::max(tile_max, s[j]);
    if (tile_max == kNegInf) return;  // nothing visible in this tile: state and acc unchanged
    const float new_max = std::max(st.max, tile_max);
    const float rescale = math_exp2(st.max - new_max);  // 0 for a row that saw nothing yet
    float sum = 0.0f;
    for (int j = 0; j < n; ++j) {
      s[j] = math_exp2(s[j] - new_max);  // exp2(-inf) = 0 for masked keys
      sum += s[j];
    }
    st.sum = st.sum * rescale + sum;
    st.max = new_max;
    float* acc = &sc.acc[std::size_t(r) * Dv];
    if (rescale != 1.0f) {
      for (int d = 0; d < Dv; ++d) acc[d] *= rescale;
    }
    for (int j = 0; j < n; ++j) {
      const float pj = s[j];
      if (pj == 0.0f) continue;
      const float* vrow = &sc.v[std::size_t(j) * Dv];
      for (int d = 0; d < Dv; ++d) acc[d] += pj * vrow[d];
    }
  }

  void write_outputs(const Scratch& sc, int b, int rows) const {
    const int Dv = p_.head_dim_v;
    T* o = static_cast<T*>(p_.o);
    for (int r = 0; r < rows; ++r) {
      const SoftmaxState& st = sc.state[r];
      const int i = sc.query[r], h = sc.head[r];
      T* orow = o + b * p_.o_batch_stride + std::int64_t(q_start(p_, b) + i) * p_.o_row_stride +
                std::int64_t(h) * p_.o_head_stride;
      // A row with no visible key: O = 0 (never 0/0 = NaN), LSE = -inf.
      const float inv = st.sum > 0.0f ? 1.0f / st.sum : 0.0f;
      const float* acc = &sc.acc[std::size_t(r) * Dv];
      for (int d = 0; d < Dv; ++d) orow[d] = E::store(acc[d] * inv);
      if (p_.lse) {
        p_.lse[b * p_.lse_batch_stride + std::int64_t(h) * p_.lse_head_stride + q_start(p_, b) + i] =
            lse_natural(st);
      }
    }
  }

  const AttentionProblem& p_;
  int group_;
  float q_scale_ = 1.0f;
  float cap_scale_ = 1.0f;
};

template <class E>
void run_attention(const AttentionProblem& p) {
  const ItemMap items(p);
  const TileRunner<E> runner(p);
  cpu::parallel_for(
      items.total(), [&] { return runner.make_scratch(); },
      [&](Scratch& scratch, std::int64_t item) {
        // Item -> (sequence, kv head, tile). Tiles of a sequence run last-first: under a
        // causal mask the last query tiles see the most keys, and starting the longest work
        // first evens out the finish across workers.
        const auto it = std::upper_bound(items.first_item.begin(), items.first_item.end(), item);
        const int b = static_cast<int>(it - items.first_item.begin()) - 1;
        const std::int64_t local = item - items.first_item[b];
        const std::int64_t tiles = (items.first_item[b + 1] - items.first_item[b]) / p.heads_kv;
        const int kv_head = static_cast<int>(local % p.heads_kv);
        const int tile = static_cast<int>(tiles - 1 - local / p.heads_kv);
        runner.run(scratch, b, kv_head, tile);
      });
}

}  // namespace

void cpu_attention(const AttentionProblem& p) {
  if (p.batch <= 0) return;
  cpu::with_element(p.dtype, [&](auto element) { run_attention<decltype(element)>(p); });
}

}  // namespace flashbuf::detail
