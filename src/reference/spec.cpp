// Reference/test utilities: ProblemSpec, its tensors and their binding (see spec.hpp).
#include "reference/spec.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <stdexcept>

namespace flashbuf::reference {

int ProblemSpec::max_q_len() const {
  int m = 0;
  for (int b = 0; b < batch; ++b) m = std::max(m, q_len(b));
  return m;
}

int ProblemSpec::max_k_len() const {
  int m = 0;
  for (int b = 0; b < batch; ++b) m = std::max(m, k_len(b));
  return m;
}

std::int64_t ProblemSpec::total_q() const {
  if (!varlen_q) return std::int64_t(batch) * seqlen_q;
  std::int64_t n = 0;
  for (int b = 0; b < batch; ++b) n += q_len(b);
  return n;
}

std::int64_t ProblemSpec::total_k() const {
  std::int64_t n = 0;
  for (int b = 0; b < batch; ++b) n += k_len(b);
  return n;
}

int ProblemSpec::max_pages() const {
  int m = 0;
  for (int b = 0; b < batch; ++b) m = std::max(m, pages_per_seq(b));
  return m + 1;
}

std::int64_t ProblemSpec::q_row(int b, int i) const {
  if (!varlen_q) return std::int64_t(b) * seqlen_q + i;
  std::int64_t row = 0;
  for (int s = 0; s < b; ++s) row += q_len(s);
  return row + i;
}

double ProblemSpec::scale() const {
  return softmax_scale != 0.0f ? double(softmax_scale) : 1.0 / std::sqrt(double(head_dim));
}

void ProblemSpec::check() const {
  auto bad = [](const std::string& what) { throw std::invalid_argument("ProblemSpec: " + what); };
  if (batch < 0) bad("batch < 0");
  if (!q_lens.empty() && int(q_lens.size()) != batch) bad("q_lens must have batch entries");
  if (!k_lens.empty() && int(k_lens.size()) != batch) bad("k_lens must have batch entries");
  if (!varlen_q && !q_lens.empty()) {
    for (int l : q_lens) if (l != seqlen_q) bad("batch-mode queries need q_lens == seqlen_q");
  }
  if (kv == KvLayout::batch) {
    for (int b = 0; b < batch; ++b) {
      if (k_len(b) > seqlen_k) bad("k_lens exceed the batch-mode capacity seqlen_k");
      if (!use_seqlens_k && k_len(b) != seqlen_k) bad("k_lens != seqlen_k needs use_seqlens_k");
    }
  }
  if (kv == KvLayout::paged && page_size < 1) bad("paged K/V need page_size >= 1");
  if (shared_cu_seqlens) {
    if (!varlen_q || kv != KvLayout::varlen) bad("shared_cu_seqlens needs varlen queries and varlen K/V");
    for (int b = 0; b < batch; ++b)
      if (q_len(b) != k_len(b)) bad("shared_cu_seqlens needs q_lens == k_lens");
  }
  if (heads_kv < 1 || heads_q % heads_kv != 0) bad("heads_q must be a multiple of heads_kv");
}

bool ProblemSpec::decode_compatible() const {
  return !varlen_q && kv != KvLayout::varlen && (kv == KvLayout::paged || use_seqlens_k);
}

std::string ProblemSpec::describe() const {
  std::ostringstream s;
  s << dtype_name(dtype) << " B=" << batch;
  if (varlen_q) s << " varlen_q(max " << max_q_len() << ")"; else s << " Sq=" << seqlen_q;
  switch (kv) {
    case KvLayout::batch: s << " Sk=" << seqlen_k << (use_seqlens_k ? "(seqlens_k)" : ""); break;
    case KvLayout::varlen:
      s << " varlen_k(max " << max_k_len() << ")" << (shared_cu_seqlens ? "(shared cu_seqlens)" : "");
      break;
    case KvLayout::paged: s << " paged(page " << page_size << ", max " << max_k_len() << ")"; break;
  }
  s << " H=" << heads_q << "/" << heads_kv << " D=" << head_dim << "/" << head_dim_v;
  switch (mask.kind) {
    case MaskKind::none: break;
    case MaskKind::causal: s << " causal"; break;
    case MaskKind::sliding_window: s << " window(" << mask.window_left << "," << mask.window_right << ")"; break;
  }
  if (softcap > 0) s << " softcap=" << softcap;
  if (softmax_scale != 0) s << " scale=" << softmax_scale;
  if (lse) s << " lse";
  if (pad) s << " pad=" << pad;
  return s.str();
}

AttentionTensors make_tensors(const ProblemSpec& spec, Rng& rng, bool fill_inputs) {
  spec.check();
  AttentionTensors t;
  const int B = spec.batch, Hq = spec.heads_q, Hkv = spec.heads_kv, D = spec.head_dim, Dv = spec.head_dim_v;
  const std::int64_t Tq = spec.total_q();
  if (spec.varlen_q) {
    t.q = HostTensor(spec.dtype, {Tq, Hq, D}, spec.pad);
    t.o = HostTensor(spec.dtype, {Tq, Hq, Dv}, spec.pad);
    if (spec.lse) t.lse = HostTensor(DType::fp32, {Hq, Tq});
    t.cu_seqlens_q = HostTensor(DType::int32, {B + 1});
    std::int32_t acc = 0;
    for (int b = 0; b <= B; ++b) {
      t.cu_seqlens_q.i32()[b] = acc;
      if (b < B) acc += spec.q_len(b);
    }
  } else {
    t.q = HostTensor(spec.dtype, {B, spec.seqlen_q, Hq, D}, spec.pad);
    t.o = HostTensor(spec.dtype, {B, spec.seqlen_q, Hq, Dv}, spec.pad);
    if (spec.lse) t.lse = HostTensor(DType::fp32, {B, Hq, spec.seqlen_q});
  }
  switch (spec.kv) {
    case KvLayout::batch:
      t.k = HostTensor(spec.dtype, {B, spec.seqlen_k, Hkv, D}, spec.pad);
      t.v = HostTensor(spec.dtype, {B, spec.seqlen_k, Hkv, Dv}, spec.pad);
      break;
    case KvLayout::varlen: {
      const std::int64_t Tk = spec.total_k();
      t.k = HostTensor(spec.dtype, {Tk, Hkv, D}, spec.pad);
      t.v = HostTensor(spec.dtype, {Tk, Hkv, Dv}, spec.pad);
      t.cu_seqlens_k = HostTensor(DType::int32, {B + 1});
      std::int32_t acc = 0;
      for (int b = 0; b <= B; ++b) {
        t.cu_seqlens_k.i32()[b] = acc;
        if (b < B) acc += spec.k_len(b);
      }
      break;
    }
    case KvLayout::paged: {
      int used = 0;
      for (int b = 0; b < B; ++b) used += spec.pages_per_seq(b);
      const int pool = used + spec.spare_pages;
      t.k = HostTensor(spec.dtype, {pool, spec.page_size, Hkv, D}, spec.pad);
      t.v = HostTensor(spec.dtype, {pool, spec.page_size, Hkv, Dv}, spec.pad);
      std::vector<std::int32_t> order(pool);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng.engine());
      const int cols = spec.max_pages();
      t.page_table = HostTensor(DType::int32, {B, cols});
      int next = 0;
      for (int b = 0; b < B; ++b) {
        for (int j = 0; j < cols; ++j) {
          t.page_table.i32()[std::int64_t(b) * cols + j] = j < spec.pages_per_seq(b) ? order[next++] : -1;
        }
      }
      break;
    }
  }
  if (spec.kv == KvLayout::paged || (spec.kv == KvLayout::batch && spec.use_seqlens_k)) {
    t.seqlens_k = HostTensor(DType::int32, {B});
    for (int b = 0; b < B; ++b) t.seqlens_k.i32()[b] = spec.k_len(b);
  }
  // Inputs: every element, unused cache rows and spare pages included (finite values there;
  // only padding between rows stays poisoned, since no kernel may read it).
  if (fill_inputs) {
    t.q.fill_normal(rng, spec.input_stddev);
    t.k.fill_normal(rng, spec.input_stddev);
    t.v.fill_normal(rng, spec.input_stddev);
  }
  return t;
}

namespace {
TensorView bound(HostTensor& h, DeviceKind device, void* ptr, int index) {
  if (h.empty()) return TensorView{};
  return h.view(device, ptr, index);
}
}  // namespace

AttentionArgs bind(const ProblemSpec& spec, AttentionTensors& t, DeviceKind device,
                   const TensorPointers* ptrs, int device_index) {
  const TensorPointers none{};
  const TensorPointers& p = ptrs ? *ptrs : none;
  AttentionArgs a;
  a.q = bound(t.q, device, p.q, device_index);
  a.k = bound(t.k, device, p.k, device_index);
  a.v = bound(t.v, device, p.v, device_index);
  a.o = bound(t.o, device, p.o, device_index);
  a.lse = bound(t.lse, device, p.lse, device_index);
  a.cu_seqlens_q = bound(t.cu_seqlens_q, device, p.cu_seqlens_q, device_index);
  a.cu_seqlens_k =
      spec.shared_cu_seqlens ? a.cu_seqlens_q : bound(t.cu_seqlens_k, device, p.cu_seqlens_k, device_index);
  a.seqlens_k = bound(t.seqlens_k, device, p.seqlens_k, device_index);
  a.page_table = bound(t.page_table, device, p.page_table, device_index);
  if (spec.varlen_q) a.max_seqlen_q = std::max(1, spec.max_q_len());
  if (spec.kv == KvLayout::varlen) a.max_seqlen_k = std::max(1, spec.max_k_len());
  a.softmax_scale = spec.softmax_scale;
  a.mask = spec.mask;
  a.softcap = spec.softcap;
  return a;
}

DecodeProblem decode_problem(const ProblemSpec& spec, DeviceKind device, int device_index) {
  if (!spec.decode_compatible()) throw std::invalid_argument("ProblemSpec: not a decode shape: " + spec.describe());
  DecodeProblem d;
  d.batch = spec.batch;
  d.q_per_seq = spec.seqlen_q;
  d.heads_q = spec.heads_q;
  d.heads_kv = spec.heads_kv;
  d.head_dim = spec.head_dim;
  d.head_dim_v = spec.head_dim_v;
  d.max_seqlen_k = spec.kv == KvLayout::paged ? spec.max_k_len() : spec.seqlen_k;
  d.page_size = spec.kv == KvLayout::paged ? spec.page_size : 0;
  d.dtype = spec.dtype;
  d.device = device;
  d.device_index = device_index;
  return d;
}

DecodeArgs bind_decode(const ProblemSpec& spec, AttentionTensors& t, DeviceKind device,
                       const TensorPointers* ptrs, int device_index) {
  const AttentionArgs a = bind(spec, t, device, ptrs, device_index);
  DecodeArgs d;
  d.q = a.q;
  d.k = a.k;
  d.v = a.v;
  d.seqlens_k = a.seqlens_k;
  d.page_table = a.page_table;
  d.o = a.o;
  d.lse = a.lse;
  d.softmax_scale = a.softmax_scale;
  d.mask = a.mask;
  d.softcap = a.softcap;
  return d;
}

void copy_varlen_sequence(const AttentionTensors& packed, std::int64_t q_row, std::int64_t k_row,
                          const ProblemSpec& one_spec, AttentionTensors& one) {
  for (int i = 0; i < one_spec.seqlen_q; ++i)
    for (int h = 0; h < one_spec.heads_q; ++h)
      for (int c = 0; c < one_spec.head_dim; ++c) one.q.set(one.q.offset({0, i, h, c}), packed.q.at({q_row + i, h, c}));
  for (int j = 0; j < one_spec.seqlen_k; ++j)
    for (int h = 0; h < one_spec.heads_kv; ++h) {
      for (int c = 0; c < one_spec.head_dim; ++c) one.k.set(one.k.offset({0, j, h, c}), packed.k.at({k_row + j, h, c}));
      for (int c = 0; c < one_spec.head_dim_v; ++c) one.v.set(one.v.offset({0, j, h, c}), packed.v.at({k_row + j, h, c}));
    }
}

PagedRow paged_row(const ProblemSpec& spec, const AttentionTensors& t, int b, int j) {
  const std::int64_t cols = t.page_table.shape()[1];
  return {t.page_table.i32()[b * cols + j / spec.page_size], j % spec.page_size};
}

void copy_to_paged(const AttentionTensors& contiguous, const ProblemSpec& paged_spec, AttentionTensors& paged) {
  for (std::int64_t i = 0; i < contiguous.q.numel(); ++i)
    paged.q.set(paged.q.logical_to_storage(i), contiguous.q.get(contiguous.q.logical_to_storage(i)));
  for (int b = 0; b < paged_spec.batch; ++b)
    for (int j = 0; j < paged_spec.k_len(b); ++j) {
      const PagedRow at = paged_row(paged_spec, paged, b, j);
      for (int h = 0; h < paged_spec.heads_kv; ++h) {
        for (int c = 0; c < paged_spec.head_dim; ++c)
          paged.k.set(paged.k.offset({at.page, at.row, h, c}), contiguous.k.at({b, j, h, c}));
        for (int c = 0; c < paged_spec.head_dim_v; ++c)
          paged.v.set(paged.v.offset({at.page, at.row, h, c}), contiguous.v.at({b, j, h, c}));
      }
    }
}

void randomize_lengths(ProblemSpec& spec, Rng& rng, int min_q, int max_q, int min_k, int max_k) {
  spec.q_lens.resize(spec.batch);
  spec.k_lens.resize(spec.batch);
  for (int b = 0; b < spec.batch; ++b) {
    spec.q_lens[b] = rng.uniform_int(min_q, max_q);
    spec.k_lens[b] = rng.uniform_int(min_k, max_k);
  }
}

}  // namespace flashbuf::reference
