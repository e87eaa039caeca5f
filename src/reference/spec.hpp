// Reference/test utilities: a problem described as data (ProblemSpec), the host tensors that
// realise it (AttentionTensors, random inputs, poisoned outputs, shuffled page pool), and the
// binding of those tensors to API arguments. Creation and binding are separate so GPU tests
// can copy the host tensors to the device and bind the device pointers instead:
//
//   ProblemSpec spec = ...;                          // sizes, layout, mask, dtype
//   AttentionTensors t = make_tensors(spec, rng);    // host data
//   AttentionArgs args = bind(spec, t);              // host pointers (CPU backend), or
//   AttentionArgs dargs = bind(spec, t, DeviceKind::cuda, &device_pointers);
//   ... run, copy o/lse back into t.o / t.lse ...
//   check_attention(spec, t)                         // against the float64 reference
#pragma once

#include <string>
#include <vector>

#include "flashbuf/flashbuf.hpp"
#include "reference/host_tensor.hpp"
#include "reference/random.hpp"

namespace flashbuf::reference {

enum class KvLayout { batch, varlen, paged };

struct ProblemSpec {
  int batch = 1;
  int seqlen_q = 1;   // batch-mode query length (ignored with varlen_q)
  int seqlen_k = 1;   // batch-mode key capacity (keys used: k_lens when use_seqlens_k)
  std::vector<int> q_lens, k_lens;  // per sequence; empty = seqlen_q / seqlen_k for all
  bool varlen_q = false;
  KvLayout kv = KvLayout::batch;
  bool use_seqlens_k = false;  // batch K/V: pass seqlens_k = k_lens (paged always does)
  // Varlen Q and K/V of equal lengths: one cu_seqlens array passed for both, as a model's
  // packed self-attention batch passes it (the Hopper launcher's persistent varlen walk needs it).
  bool shared_cu_seqlens = false;
  int heads_q = 1, heads_kv = 1;
  int head_dim = 64, head_dim_v = 64;
  DType dtype = DType::bf16;
  Mask mask{};
  float softcap = 0.0f;
  float softmax_scale = 0.0f;  // 0 = 1/sqrt(head_dim)
  int page_size = 0;           // KvLayout::paged
  int spare_pages = 3;         // pool pages no sequence uses (pages sit anywhere in the pool)
  bool lse = true;
  int pad = 0;                 // extra elements after each row of q, k, v, o (strided views)
  double input_stddev = 1.0;

  int q_len(int b) const { return q_lens.empty() ? seqlen_q : q_lens[b]; }
  int k_len(int b) const { return k_lens.empty() ? seqlen_k : k_lens[b]; }
  int max_q_len() const;
  int max_k_len() const;
  std::int64_t total_q() const;  // rows of q: sum of q_len (varlen) or batch * seqlen_q
  std::int64_t total_k() const;
  int pages_per_seq(int b) const { return page_size > 0 ? (k_len(b) + page_size - 1) / page_size : 0; }
  int max_pages() const;  // columns of the page table (one more than any sequence needs)
  // Row of q (and o) holding query i of sequence b.
  std::int64_t q_row(int b, int i) const;
  double scale() const;
  // Checks the spec is self-consistent (lengths sized to batch, ...); throws std::invalid_argument.
  void check() const;
  // One line: "bf16 B=2 Sq=17 Sk=33 H=4/2 D=64/64 causal paged(page 3) lse".
  std::string describe() const;
  // Token generation shape: batch-mode q (q_per_seq = seqlen_q), K/V batch with seqlens_k or paged.
  bool decode_compatible() const;
};

struct AttentionTensors {
  HostTensor q, k, v, o, lse;
  HostTensor cu_seqlens_q, cu_seqlens_k, seqlens_k, page_table;  // int32, empty when unused
};

// Random normal q, k, v (rounded to the dtype), poisoned o and lse, index tensors. Paged K/V
// take a shuffled pool: sequence b's pages are scattered among spare pages; unused page-table
// entries hold -1 (they must never be read). fill_inputs = false leaves q, k, v poisoned for
// the caller to fill (the CLI fills multi-GiB benchmark caches with a faster generator).
AttentionTensors make_tensors(const ProblemSpec& spec, Rng& rng, bool fill_inputs = true);

// Device pointers for bind(): null = use the host tensor's own storage.
struct TensorPointers {
  void* q = nullptr; void* k = nullptr; void* v = nullptr; void* o = nullptr; void* lse = nullptr;
  void* cu_seqlens_q = nullptr; void* cu_seqlens_k = nullptr; void* seqlens_k = nullptr;
  void* page_table = nullptr;
};

AttentionArgs bind(const ProblemSpec& spec, AttentionTensors& t, DeviceKind device = DeviceKind::cpu,
                   const TensorPointers* pointers = nullptr, int device_index = 0);

DecodeProblem decode_problem(const ProblemSpec& spec, DeviceKind device = DeviceKind::cpu, int device_index = 0);
DecodeArgs bind_decode(const ProblemSpec& spec, AttentionTensors& t, DeviceKind device = DeviceKind::cpu,
                       const TensorPointers* pointers = nullptr, int device_index = 0);

// Sequence b of a packed varlen problem as a problem of its own: copies its q rows (from q_row
// of `packed`) and k, v rows (from k_row) into `one`, the batch-form tensors of a one-sequence
// spec `one_spec` (batch 1, that sequence's lengths), so a varlen run can be compared with
// per-sequence runs.
void copy_varlen_sequence(const AttentionTensors& packed, std::int64_t q_row, std::int64_t k_row,
                          const ProblemSpec& one_spec, AttentionTensors& one);

// Key j of sequence b of a paged problem: its pool page (from t's page table) and its row in
// that page.
struct PagedRow {
  int page, row;
};
PagedRow paged_row(const ProblemSpec& spec, const AttentionTensors& t, int b, int j);

// The inputs of a batch-form (contiguous K/V) problem in a paged problem's layout: q as it is
// (the same shape), and keys [0, paged_spec.k_len(b)) of every sequence into the pool pages
// the paged problem's table gives them, so the two runs can be compared bit for bit.
void copy_to_paged(const AttentionTensors& contiguous, const ProblemSpec& paged_spec, AttentionTensors& paged);

// Random per-sequence lengths: q_lens in [min_q, max_q], k_lens in [min_k, max_k].
void randomize_lengths(ProblemSpec& spec, Rng& rng, int min_q, int max_q, int min_k, int max_k);

}  // namespace flashbuf::reference
