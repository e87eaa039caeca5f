// CPU backend: exact blocked flash-attention (DESIGN.md, api layer). It serves every feature
// of the API — bf16/fp16/fp32, any head dims, masks, softcap, sinks, GQA, varlen, paged K/V,
// LSE — and is the engine of `flashbuf run` where no GPU is found.
//
// Work item = one tile of up to kTileRows "packed rows" of one (sequence, KV head). Packed row
// r is (query r / G, head r % G) with G = heads_q / heads_kv: the whole GQA group of a query
// sits in one tile, as the GPU decode packs it into the MMA's M dimension, so each K/V tile
// is read once for G heads and a decode step is a single tile per KV head. K/V tiles are
// packed once per call for prefill, read in place from contiguous caches, or gathered per tile
// (paged decode). For each key tile of the tile's key range:
//     S = Q · Kᵀ                 tile product on oneDNN (cpu/tile_gemm.hpp), fp32 out
//     softcap, mask              per row: the visible columns are one interval
//     online softmax in base 2   cpu/online_softmax.hpp: running max, compensated sum
//     O_tile = P · V             tile product, fp32 out
//     O = O · rescale + O_tile   compensated (Kahan) fp32 accumulation across tiles
// then O /= sum, LSE = (beta·max + log2 sum)·ln 2, and the sink (if any) joins once per row.
//
// Precision: bf16 inputs run bf16 × bf16 → fp32 products where the CPU has them (AVX-512 BF16,
// AMX) with P rounded to bf16 for P·V, as the GPU kernels do; fp16 inputs (and bf16 on CPUs
// without bf16 products) are widened exactly to fp32 and run fp32 products. Scores stay
// unscaled in the products (Q is not pre-multiplied, so bf16 Q is not rounded again); the
// scale enters the exponent (see online_softmax.hpp).
//
// NaN rule (DESIGN.md): a NaN in a row's query or in a key or value it sees makes the row's O
// and LSE NaN; masked keys and unused cache rows are never read into a row. Products over a
// tile mix all its keys, so a tile that is masked for some rows and holds a non-finite value
// takes an exact per-row path for P · V that reads only each row's visible keys.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

#include "api/backends.hpp"
#include "cpu/element.hpp"
#include "cpu/online_softmax.hpp"
#include "cpu/parallel.hpp"
#include "cpu/tile_gemm.hpp"
#include "flashbuf/core/mask.hpp"
#include "flashbuf/core/softmax_state.hpp"

namespace flashbuf::detail {
namespace {

using cpu::BLayout;
using cpu::GemmInput;
using cpu::RowSoftmax;

// 128 rows x 128 keys: oneDNN's bf16 and fp32 products reach their single-core peak at
// M, N >= 128 with K = 128 (64 x 64 runs ~25% slower per FLOP), and the Kᵀ, V, S and P tiles of
// head dim 128 (32-64 KiB each) still sit in L2 beside the Q tile. Without a right window
// bound, 256-key tiles up to head dim 128 halve the softmax passes and the per-tile
// rescaling of O at L2-resident sizes (bench/NOTES-cpu.md); with one (causal), diagonal tiles
// would compute more masked scores than the wider tile saves.
constexpr int kTileRows = 128;
constexpr int key_tile_for(int head_dim, bool right_bounded) { return head_dim <= 128 && !right_bounded ? 256 : 128; }
static_assert(key_tile_for(64, false) % cpu::kSoftmaxLanes == 0 && key_tile_for(128, true) % cpu::kSoftmaxLanes == 0,
              "score rows are walked in whole vectors");

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr double kMaxPackedBytes = double(1u << 30);  // packed K/V of one call, at most

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

// C is the type the products read: float, or std::uint16_t holding bf16 bits.
template <class E, class C>
class BlockedAttention {
 public:
  using T = typename E::Storage;
  static constexpr bool kBf16Products = std::is_same_v<C, std::uint16_t>;
  static constexpr GemmInput kInput = kBf16Products ? GemmInput::bf16 : GemmInput::f32;
  static constexpr std::uint8_t kUnpacked = 0, kPacking = 1, kPacked = 2;  // a packed tile's state

  struct Scratch {
    std::vector<C> q, k, v, p;
    std::vector<float> s, o_tile, acc, acc_comp;
    std::vector<RowSoftmax> row;
    std::vector<float> rescale;
    std::vector<int> query, head, visible_begin, visible_end;
    std::vector<unsigned char> gemm_scratchpad;
  };

  BlockedAttention(const AttentionProblem& p, const CpuExtras& extras)
      : p_(p), extras_(extras), group_(p.heads_q / p.heads_kv), tile_keys_(key_tile_for(p.head_dim, p.window_right >= 0)) {
    const double scale = p.softmax_scale;
    if (p.softcap > 0.0f) {
      beta_ = cpu::exponent_scale(kLog2e);  // capped scores are in natural-log units
    } else {
      beta_ = cpu::exponent_scale(std::fabs(scale) * double(kLog2e));
      negate_q_ = scale < 0;  // max of scale·S is scale·min S: run on -S with |scale|
    }
    // Full key tiles of contiguous caches are read in place when the products can read the
    // storage type and the rows do not overlap: no copy of K and V per query tile.
    direct_kv_ = std::is_same_v<T, C> && !p.paged() && p.k_row_stride >= p.head_dim && p.v_row_stride >= p.head_dim_v;
    if (direct_kv_) {
      try {
        cpu::tile_gemm(kTileRows, tile_keys_, p.head_dim, kInput, BLayout::n_by_k, p.k_row_stride);
        cpu::tile_gemm(kTileRows, p.head_dim_v, tile_keys_, kInput, BLayout::k_by_n, p.v_row_stride);
      } catch (const RuntimeError&) {
        direct_kv_ = false;
      }
    }
  }

  Scratch make_scratch() const {
    const int D = p_.head_dim, Dv = p_.head_dim_v;
    Scratch s;
    s.q.resize(std::size_t(kTileRows) * D);
    s.k.resize(std::size_t(tile_keys_) * D);
    s.v.resize(std::size_t(tile_keys_) * Dv);
    s.p.resize(std::size_t(kTileRows) * tile_keys_);
    s.s.resize(std::size_t(kTileRows) * tile_keys_);
    s.o_tile.resize(std::size_t(kTileRows) * Dv);
    s.acc.resize(std::size_t(kTileRows) * Dv);
    s.acc_comp.resize(std::size_t(kTileRows) * Dv);
    s.row.resize(kTileRows);
    s.rescale.resize(kTileRows);
    s.query.resize(kTileRows);
    s.head.resize(kTileRows);
    s.visible_begin.resize(kTileRows);
    s.visible_end.resize(kTileRows);
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
    const cpu::TileGemm& qk = cpu::tile_gemm(rows, tile_keys_, D, kInput, BLayout::n_by_k);
    const cpu::TileGemm& pv = cpu::tile_gemm(rows, Dv, tile_keys_, kInput, BLayout::k_by_n);
    const cpu::TileGemm* qk_direct = nullptr;
    const cpu::TileGemm* pv_direct = nullptr;
    const cpu::TileGemm* qk_packed = nullptr;
    std::size_t pad = std::max(qk.scratchpad_bytes(), pv.scratchpad_bytes());
    if (packed_.k) {
      qk_packed = &cpu::tile_gemm(rows, tile_keys_, D, kInput, BLayout::k_by_n);
      pad = std::max(pad, qk_packed->scratchpad_bytes());
    }
    if (direct_kv_) {
      qk_direct = &cpu::tile_gemm(rows, tile_keys_, D, kInput, BLayout::n_by_k, p_.k_row_stride);
      pv_direct = &cpu::tile_gemm(rows, Dv, tile_keys_, kInput, BLayout::k_by_n, p_.v_row_stride);
      pad = std::max({pad, qk_direct->scratchpad_bytes(), pv_direct->scratchpad_bytes()});
    }
    if (sc.gemm_scratchpad.size() < pad) sc.gemm_scratchpad.resize(pad);

    load_q_tile(sc, b, rows);
    std::fill(sc.acc.begin(), sc.acc.begin() + std::size_t(rows) * Dv, 0.0f);
    std::fill(sc.acc_comp.begin(), sc.acc_comp.begin() + std::size_t(rows) * Dv, 0.0f);
    std::fill(sc.row.begin(), sc.row.begin() + rows, RowSoftmax{kNegInf, 0.0f, 0.0f});

    const MaskParams mask{seq_q, seq_k, p_.window_left, p_.window_right};
    const KeyRange keys = key_range(mask, q_first, q_last + 1);
    // Key tiles aligned to multiples of tile_keys_ (the packed tiles' grid); columns outside
    // the range a row sees are masked below.
    const int tile_end = keys.empty() ? 0 : (keys.end + tile_keys_ - 1) / tile_keys_;
    for (int t = keys.empty() ? 0 : keys.begin / tile_keys_; t < tile_end; ++t) {
      const int k0 = t * tile_keys_;
      const int n = std::min(tile_keys_, seq_k - k0);
      const bool in_place = direct_kv_ && n == tile_keys_;
      // K: packed once per call, read in place, or copied here, in that order of preference.
      const C* k_tile = sc.k.data();
      const cpu::TileGemm* qk_use = &qk;
      if (packed_.k) {
        ensure_packed(b, kv_head, t);
        k_tile = packed_k_tile(b, kv_head, t);
        qk_use = qk_packed;
      } else if (in_place) {
        k_tile = static_cast<const C*>(p_.k) +
                 kv_offset(p_, b, k0, kv_head, p_.k_batch_stride, p_.k_row_stride, p_.k_head_stride);
        qk_use = qk_direct;
      } else {
        load_k_tile(sc, b, kv_head, k0, n);
      }
      qk_use->run(sc.q.data(), k_tile, sc.s.data(), sc.gemm_scratchpad.data());
      const C* v_tile = sc.v.data();
      std::int64_t v_stride = Dv;
      const cpu::TileGemm* pv_use = &pv;
      if (packed_.v) {
        v_tile = packed_v_tile(b, kv_head, t);
      } else if (in_place) {
        v_tile = static_cast<const C*>(p_.v) +
                 kv_offset(p_, b, k0, kv_head, p_.v_batch_stride, p_.v_row_stride, p_.v_head_stride);
        v_stride = p_.v_row_stride;
        pv_use = pv_direct;
      } else {
        load_v_tile(sc, b, kv_head, k0, n);
      }
      const bool full = tile_fully_visible(mask, q_first, q_last + 1, k0, k0 + n);
      for (int r = 0; r < rows; ++r) {
        int vb = 0, ve = n;
        if (!full) visible_columns(mask, sc.query[r], k0, n, vb, ve);
        sc.visible_begin[r] = vb;
        sc.visible_end[r] = ve;
        float* s = &sc.s[std::size_t(r) * tile_keys_];
        if (p_.softcap > 0.0f) soft_cap(s, vb, ve);
        sc.rescale[r] = cpu::online_softmax_row(s, tile_keys_, vb, ve, beta_, sc.row[r], &sc.p[std::size_t(r) * tile_keys_]);
      }
      if (!full && v_tile_non_finite(v_tile, v_stride, n)) {
        visible_only_pv(sc, v_tile, v_stride, rows);
      } else {
        pv_use->run(sc.p.data(), v_tile, sc.o_tile.data(), sc.gemm_scratchpad.data());
      }
      for (int r = 0; r < rows; ++r) {
        cpu::accumulate_tile(&sc.acc[std::size_t(r) * Dv], &sc.acc_comp[std::size_t(r) * Dv],
                             &sc.o_tile[std::size_t(r) * Dv], sc.rescale[r], Dv);
      }
    }
    write_outputs(sc, b, rows);
  }

 private:
  static C to_compute(T x) {
    if constexpr (std::is_same_v<C, T>) {
      return x;
    } else if constexpr (kBf16Products) {
      return float_to_bf16(E::load(x));  // not reached: bf16 products read bf16 as is
    } else {
      return E::load(x);
    }
  }
  static float compute_to_float(C x) {
    if constexpr (kBf16Products) return bf16_to_float(x);
    else return x;
  }

  // Copies n elements, widening to C where needed (a plain copy when T == C).
  static void copy_row(const T* src, C* dst, int n) {
    if constexpr (std::is_same_v<C, T>) {
      std::memcpy(dst, src, sizeof(T) * std::size_t(n));
    } else {
      for (int d = 0; d < n; ++d) dst[d] = to_compute(src[d]);
    }
  }

  void load_q_tile(Scratch& sc, int b, int rows) const {
    const int D = p_.head_dim;
    const T* q = static_cast<const T*>(p_.q);
    for (int r = 0; r < rows; ++r) {
      const T* src = q + b * p_.q_batch_stride + std::int64_t(q_start(p_, b) + sc.query[r]) * p_.q_row_stride +
                     std::int64_t(sc.head[r]) * p_.q_head_stride;
      C* dst = &sc.q[std::size_t(r) * D];
      copy_row(src, dst, D);
      if (negate_q_) {
        // Sign flips are exact in every type: flip the sign bit of bf16, negate floats.
        for (int d = 0; d < D; ++d) {
          if constexpr (kBf16Products) dst[d] = static_cast<C>(dst[d] ^ 0x8000u);
          else dst[d] = -dst[d];
        }
      }
    }
  }

  // Rows past n of a partial tile are zeros, so the products read defined, finite values
  // (their scores are masked and their P is 0).
  void load_k_tile(Scratch& sc, int b, int kv_head, int k0, int n) const {
    const int D = p_.head_dim;
    const T* k = static_cast<const T*>(p_.k);
    for (int j = 0; j < n; ++j) {
      copy_row(k + kv_offset(p_, b, k0 + j, kv_head, p_.k_batch_stride, p_.k_row_stride, p_.k_head_stride),
               &sc.k[std::size_t(j) * D], D);
    }
    if (n < tile_keys_) std::fill(sc.k.begin() + std::size_t(n) * D, sc.k.end(), C(0));
  }

  void load_v_tile(Scratch& sc, int b, int kv_head, int k0, int n) const {
    const int Dv = p_.head_dim_v;
    const T* v = static_cast<const T*>(p_.v);
    for (int j = 0; j < n; ++j) {
      copy_row(v + kv_offset(p_, b, k0 + j, kv_head, p_.v_batch_stride, p_.v_row_stride, p_.v_head_stride),
               &sc.v[std::size_t(j) * Dv], Dv);
    }
    if (n < tile_keys_) std::fill(sc.v.begin() + std::size_t(n) * Dv, sc.v.end(), C(0));
  }

 public:
  // Prefill: every key tile is read by many query tiles, so K is packed once per call as Kᵀ
  // tiles (D x tile_keys_, the layout oneDNN's products read without a copy of their own), and V
  // too where it cannot be read in place (paged caches, widened dtypes). Decode steps (one
  // query tile per KV head) read each tile once and skip this.
  // Sizes the packed tiles; each is filled by the first worker that needs it (ensure_packed),
  // so packing needs no pass of its own and no barrier before the work starts.
  void plan_packing() {
    const int heads = p_.heads_kv;
    packed_.first_tile.assign(p_.batch + 1, 0);
    for (int b = 0; b < p_.batch; ++b) {
      packed_.first_tile[b + 1] =
          packed_.first_tile[b] + std::int64_t(heads) * ((k_len(p_, b) + tile_keys_ - 1) / tile_keys_);
    }
    const std::int64_t tiles = packed_.first_tile.back();
    if (tiles == 0) return;
    const std::size_t k_elems = std::size_t(p_.head_dim) * tile_keys_, v_elems = std::size_t(tile_keys_) * p_.head_dim_v;
    packed_.k.reset(new C[std::size_t(tiles) * k_elems]);
    if (!direct_kv_) packed_.v.reset(new C[std::size_t(tiles) * v_elems]);
    packed_.state.reset(new std::atomic<std::uint8_t>[std::size_t(tiles)]);
    for (std::int64_t g = 0; g < tiles; ++g) packed_.state[g].store(kUnpacked, std::memory_order_relaxed);
  }

 private:
  void pack_tile(int b, int h, int t, std::int64_t g) const {
    const int D = p_.head_dim, Dv = p_.head_dim_v;
    const int k0 = t * tile_keys_;
    const int n = std::min(tile_keys_, k_len(p_, b) - k0);
    C* kt = packed_.k.get() + std::size_t(g) * D * tile_keys_;
    const T* k = static_cast<const T*>(p_.k);
    for (int j = 0; j < n; ++j) {
      const T* row = k + kv_offset(p_, b, k0 + j, h, p_.k_batch_stride, p_.k_row_stride, p_.k_head_stride);
      for (int d = 0; d < D; ++d) kt[std::size_t(d) * tile_keys_ + j] = to_compute(row[d]);
    }
    for (int d = 0; d < D; ++d) std::fill(kt + std::size_t(d) * tile_keys_ + n, kt + std::size_t(d + 1) * tile_keys_, C(0));
    if (!packed_.v) return;
    C* vt = packed_.v.get() + std::size_t(g) * tile_keys_ * Dv;
    const T* v = static_cast<const T*>(p_.v);
    for (int j = 0; j < n; ++j) {
      copy_row(v + kv_offset(p_, b, k0 + j, h, p_.v_batch_stride, p_.v_row_stride, p_.v_head_stride),
               vt + std::size_t(j) * Dv, Dv);
    }
    std::fill(vt + std::size_t(n) * Dv, vt + std::size_t(tile_keys_) * Dv, C(0));
  }

  std::int64_t packed_tile(int b, int h, int t) const {
    const std::int64_t per_head = (packed_.first_tile[b + 1] - packed_.first_tile[b]) / p_.heads_kv;
    return packed_.first_tile[b] + h * per_head + t;
  }

  // Packs tile t of (b, h) unless done: one worker packs, one that arrives meanwhile waits the
  // few microseconds that takes.
  void ensure_packed(int b, int h, int t) const {
    const std::int64_t g = packed_tile(b, h, t);
    std::atomic<std::uint8_t>& state = packed_.state[g];
    if (state.load(std::memory_order_acquire) == kPacked) return;
    std::uint8_t expected = kUnpacked;
    if (state.compare_exchange_strong(expected, kPacking, std::memory_order_acq_rel)) {
      pack_tile(b, h, t, g);
      state.store(kPacked, std::memory_order_release);
      return;
    }
    while (state.load(std::memory_order_acquire) != kPacked) std::this_thread::yield();
  }

  const C* packed_k_tile(int b, int h, int t) const {
    return packed_.k.get() + std::size_t(packed_tile(b, h, t)) * p_.head_dim * tile_keys_;
  }
  const C* packed_v_tile(int b, int h, int t) const {
    return packed_.v.get() + std::size_t(packed_tile(b, h, t)) * tile_keys_ * p_.head_dim_v;
  }

  // The columns [vb, ve) of key tile [k0, k0 + n) that query i sees (one interval: DESIGN.md's
  // masks are windows around the diagonal). In 64-bit: diagonal ± window may pass INT_MAX.
  void visible_columns(const MaskParams& mask, int i, int k0, int n, int& vb, int& ve) const {
    const std::int64_t diag = std::int64_t(i) + mask.seqlen_k - mask.seqlen_q;
    std::int64_t lo = 0, hi = mask.seqlen_k;
    if (mask.has_left_bound()) lo = std::max<std::int64_t>(lo, diag - mask.window_left);
    if (mask.has_right_bound()) hi = std::min<std::int64_t>(hi, diag + mask.window_right + 1);
    vb = static_cast<int>(std::clamp<std::int64_t>(lo - k0, 0, n));
    ve = static_cast<int>(std::clamp<std::int64_t>(hi - k0, 0, n));
    if (ve < vb) ve = vb;
  }

  // s = softcap · tanh(scale · s / softcap), in double: with a softcap near FLT_MAX or below
  // FLT_MIN, or a huge scale, the float products overflow or underflow on the way.
  void soft_cap(float* s, int vb, int ve) const {
    const double cap = p_.softcap, scale = p_.softmax_scale;
    for (int j = vb; j < ve; ++j) s[j] = static_cast<float>(cap * std::tanh(double(s[j]) * scale / cap));
  }

  // True when any of the n V rows (`stride` elements apart) holds inf or NaN.
  bool v_tile_non_finite(const C* v, std::int64_t stride, int n) const {
    const int Dv = p_.head_dim_v;
    for (int j = 0; j < n; ++j) {
      const C* row = v + j * stride;
      if constexpr (kBf16Products) {
        if (cpu::any_non_finite_bf16(row, Dv)) return true;
      } else {
        if (cpu::any_non_finite(row, Dv)) return true;
      }
    }
    return false;
  }

  // P · V reading only the keys each row sees (a masked key's V may be NaN or inf, and
  // 0 · NaN would leak it into the product).
  void visible_only_pv(Scratch& sc, const C* v, std::int64_t v_stride, int rows) const {
    const int Dv = p_.head_dim_v;
    for (int r = 0; r < rows; ++r) {
      float* out = &sc.o_tile[std::size_t(r) * Dv];
      std::fill(out, out + Dv, 0.0f);
      for (int j = sc.visible_begin[r]; j < sc.visible_end[r]; ++j) {
        const float pj = compute_to_float(sc.p[std::size_t(r) * tile_keys_ + j]);
        const C* vrow = v + j * v_stride;
        for (int d = 0; d < Dv; ++d) out[d] += pj * compute_to_float(vrow[d]);
      }
    }
  }

  void write_outputs(Scratch& sc, int b, int rows) const {
    const int Dv = p_.head_dim_v;
    T* o = static_cast<T*>(p_.o);
    const double beta = beta_.value();
    for (int r = 0; r < rows; ++r) {
      const RowSoftmax& st = sc.row[r];
      const int i = sc.query[r], h = sc.head[r];
      T* orow = o + b * p_.o_batch_stride + std::int64_t(q_start(p_, b) + i) * p_.o_row_stride +
                std::int64_t(h) * p_.o_head_stride;
      float* acc = &sc.acc[std::size_t(r) * Dv];
      float lse;
      if (st.max == kNegInf) {  // no visible key: O = 0 (never 0/0), LSE = -inf
        std::fill(acc, acc + Dv, 0.0f);
        lse = kNegInf;
      } else {
        const float inv = 1.0f / st.sum;  // NaN for a NaN row
        bool nan = st.max != st.max || st.sum != st.sum;
        for (int d = 0; d < Dv; ++d) {
          acc[d] *= inv;
          nan = nan || acc[d] != acc[d];
        }
        // ln(sum_j e^(scale x_j)) = ln 2 · (beta · max + log2 sum), in double: beta · max may
        // pass FLT_MAX (then the fp32 LSE is inf, the nearest float).
        lse = nan ? kNaN : static_cast<float>((beta * double(st.max) + std::log2(double(st.sum))) * double(kLn2));
        if (nan) std::fill(acc, acc + Dv, kNaN);  // a NaN anywhere in what the row read
      }
      if (extras_.sinks) {
        const float sink = extras_.sinks[std::int64_t(h) * extras_.sinks_stride];
        float factor = 0.0f;
        if (lse != lse) {
          factor = 1.0f;  // stays NaN
        } else if (lse == std::numeric_limits<float>::infinity() && sink == sink) {
          factor = 1.0f;  // the row's own mass dominates any finite sink (a NaN one: apply_sink)
        } else {
          factor = apply_sink(lse, sink, lse);
        }
        for (int d = 0; d < Dv; ++d) acc[d] *= factor;
      }
      for (int d = 0; d < Dv; ++d) orow[d] = E::store(acc[d]);
      if (p_.lse) {
        p_.lse[b * p_.lse_batch_stride + std::int64_t(h) * p_.lse_head_stride + q_start(p_, b) + i] = lse;
      }
    }
  }

  const AttentionProblem& p_;
  const CpuExtras& extras_;
  int group_;
  int tile_keys_;  // keys per tile: key_tile_for(head_dim, right bound)
  cpu::ExponentScale beta_{1.0f};
  bool negate_q_ = false;
  bool direct_kv_ = false;
  struct PackedKv {
    std::vector<std::int64_t> first_tile;  // per sequence: its first packed tile (all KV heads)
    std::unique_ptr<C[]> k;                // per tile: Kᵀ, D x tile_keys_, zero past the keys
    std::unique_ptr<C[]> v;                // per tile: tile_keys_ x Dv, zero past the keys; or none
    std::unique_ptr<std::atomic<std::uint8_t>[]> state;  // per tile: kUnpacked, kPacking, kPacked
  } packed_;
};

template <class E, class C>
void run_attention(const AttentionProblem& p, const CpuExtras& extras) {
  const ItemMap items(p);
  BlockedAttention<E, C> runner(p, extras);
  // Packing costs a copy of K (and V) for the call; above kMaxPackedBytes the tiles are
  // gathered per query tile instead, with memory of one tile per worker.
  const double kv_bytes = double(p.batch) * p.max_seqlen_k * p.heads_kv * (p.head_dim + p.head_dim_v) * sizeof(C);
  if (items.total() >= 2 * std::int64_t(p.batch) * p.heads_kv && kv_bytes <= kMaxPackedBytes) {
    runner.plan_packing();
  }
  using Scratch = typename BlockedAttention<E, C>::Scratch;
  cpu::parallel_for(
      items.total(), extras.num_threads, [&] { return runner.make_scratch(); },
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

void cpu_attention(const AttentionProblem& p, const CpuExtras& extras) {
  if (p.batch <= 0) return;
  switch (p.dtype) {
    case DType::bf16:
      if (cpu::bf16_gemm_supported()) run_attention<cpu::Bf16, std::uint16_t>(p, extras);
      else run_attention<cpu::Bf16, float>(p, extras);
      break;
    case DType::fp16: run_attention<cpu::Fp16, float>(p, extras); break;
    default: run_attention<cpu::Fp32, float>(p, extras); break;
  }
}

CpuExtras cpu_extras(const TensorView& sinks, int num_threads) {
  CpuExtras extras;
  extras.num_threads = num_threads > 0 ? num_threads : 0;
  // Validation of `sinks` (rank, dtype, length Hq, device) is the API layer's; read it only
  // when it is what the CPU backend can read.
  if (sinks.present() && sinks.data != nullptr && sinks.rank == 1 && sinks.dtype == DType::fp32 &&
      sinks.device == DeviceKind::cpu) {
    extras.sinks = static_cast<const float*>(sinks.data);
    extras.sinks_stride = sinks.stride[0];
  }
  return extras;
}

}  // namespace flashbuf::detail
