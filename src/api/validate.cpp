// API layer: validation of attention, decode and merge_states arguments (see validate.hpp).
//
// Order of the checks: presence and null pointers, dtypes, devices, ranks and shapes, strides,
// alignment, what the chosen device can run, scalars, and last the contents of the index
// tensors. Every failure is an ArgumentError naming the argument; nothing is ever written.
#include "api/validate.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>
#include <vector>

#include "api/backends.hpp"

namespace flashbuf::detail {
namespace {

// Upper bound of the page sizes the kernels support (DESIGN.md: pages of 1..256 tokens).
constexpr int kMaxPageSize = 256;
// The GPU paths move 16 bytes per vector access (cp.async, ldmatrix, TMA): base pointers and
// every stride but the last must keep each row's start on a 16-byte boundary.
constexpr std::size_t kGpuAlignmentBytes = 16;
// Workspace alignment promised by DecodePlan (partial O / LSE arrays are carved out of it).
constexpr std::size_t kWorkspaceAlignment = 256;
constexpr int kMaxQueriesPerSequence = 16;

constexpr std::int64_t kAny = -1;  // a shape extent that is not constrained

struct Dim {
  std::int64_t extent;  // kAny: free
  const char* name;
};

std::string device_string(DeviceKind device, int index) {
  return device == DeviceKind::cpu ? std::string("cpu") : "cuda:" + std::to_string(index);
}
std::string device_string(const TensorView& t) { return device_string(t.device, t.device_index); }

[[noreturn]] void fail(const std::string& arg, const std::string& what, bool type_error = false) {
  throw ArgumentError(arg, what, type_error);
}

void require_present(const char* arg, const TensorView& t) {
  if (!t.present()) fail(arg, "required tensor is missing (rank 0)");
}

// A present tensor with elements needs a pointer; an empty one (e.g. zero total tokens) may
// come from an allocator that returns null for zero bytes.
void check_pointer(const char* arg, const TensorView& t) {
  if (t.rank < 0 || t.rank > kMaxRank) {
    fail(arg, "rank " + std::to_string(t.rank) + " is outside 0.." + std::to_string(kMaxRank));
  }
  for (int i = 0; i < t.rank; ++i) {
    if (t.shape[i] < 0) {
      fail(arg, "negative extent in shape " + shape_string(t));
    }
    if (t.stride[i] < 0) {
      fail(arg, "negative strides are not supported (dimension " + std::to_string(i) + ")");
    }
    if (t.shape[i] > std::numeric_limits<std::int32_t>::max()) {
      fail(arg, "extent " + std::to_string(t.shape[i]) + " of shape " + shape_string(t) +
                    " exceeds the int32 range the kernels index with");
    }
  }
  if (t.present() && t.data == nullptr && t.numel() > 0) {
    fail(arg, "null data pointer for a tensor of shape " + shape_string(t));
  }
}

void expect_dtype(const char* arg, const TensorView& t, DType expected) {
  if (t.dtype != expected) {
    fail(arg,
         std::string("expected dtype ") + dtype_name(expected) + ", got " + dtype_name(t.dtype),
         /*type_error=*/true);
  }
}

void expect_same_dtype(const char* arg, const TensorView& t, const char* ref_arg, DType ref) {
  if (t.dtype != ref) {
    fail(arg,
         std::string("dtype ") + dtype_name(t.dtype) + " does not match " + ref_arg + "'s " +
             dtype_name(ref) + " (all of q, k, v and o share one dtype)",
         /*type_error=*/true);
  }
}

void expect_same_device(const char* arg, const TensorView& t, const TensorView& ref,
                        const char* ref_arg) {
  if (!t.present()) return;
  if (t.device != ref.device || (t.device == DeviceKind::cuda && t.device_index != ref.device_index)) {
    fail(arg, "is on " + device_string(t) + " but " + ref_arg + " is on " + device_string(ref) +
                  " (all tensors of a call must be on one device)");
  }
}

void expect_shape(const char* arg, const TensorView& t, std::initializer_list<Dim> dims) {
  bool ok = t.rank == static_cast<int>(dims.size());
  int i = 0;
  for (const Dim& d : dims) {
    if (ok && d.extent != kAny && t.shape[i] != d.extent) ok = false;
    ++i;
  }
  if (ok) return;
  std::ostringstream expected;
  // Free extents print as the tensor's own extent when the rank is right (so the expected
  // shape is concrete and differs from the actual one only where it must), else as names.
  const bool same_rank = t.rank == static_cast<int>(dims.size());
  expected << "expected shape (";
  i = 0;
  for (const Dim& d : dims) {
    if (i) expected << ", ";
    if (d.extent != kAny) {
      expected << d.extent;
    } else if (same_rank) {
      expected << t.shape[i];
    } else {
      expected << d.name;
    }
    ++i;
  }
  expected << ") [";
  i = 0;
  for (const Dim& d : dims) expected << (i++ ? ", " : "") << d.name;
  expected << "], got " << (t.present() ? shape_string(t) : std::string("nothing (rank 0)"));
  fail(arg, expected.str());
}

// The last dimension must be dense: every kernel reads rows as contiguous vectors.
void expect_unit_last_stride(const char* arg, const TensorView& t) {
  const int last = t.rank - 1;
  if (last >= 0 && t.shape[last] > 1 && t.stride[last] != 1) {
    fail(arg, "stride not supported: the last dimension must be contiguous (stride 1), got strides " +
                  [&] {
                    std::ostringstream s;
                    s << "(";
                    for (int i = 0; i < t.rank; ++i) s << (i ? ", " : "") << t.stride[i];
                    s << ")";
                    return s.str();
                  }());
  }
}

// CPU: element alignment. CUDA: 16-byte base pointers and, for tensors the kernels read with
// vector accesses, strides that are multiples of 16 bytes (8 elements of bf16/fp16).
void expect_aligned(const char* arg, const TensorView& t, bool vector_access) {
  if (!t.present() || t.data == nullptr) return;
  const auto address = reinterpret_cast<std::uintptr_t>(t.data);
  const std::size_t elem = dtype_size(t.dtype);
  const bool gpu = t.device == DeviceKind::cuda && vector_access;
  const std::size_t align = gpu ? kGpuAlignmentBytes : elem;
  if (address % align != 0) {
    std::ostringstream s;
    s << "unaligned data pointer 0x" << std::hex << address << std::dec << ": expected a multiple of "
      << align << " bytes" << (gpu ? " on the GPU" : std::string(" (the ") + dtype_name(t.dtype) + " element size)");
    fail(arg, s.str());
  }
  if (!gpu) return;
  const std::int64_t elems_per_vector = static_cast<std::int64_t>(kGpuAlignmentBytes / elem);
  for (int i = 0; i + 1 < t.rank; ++i) {
    if (t.shape[i] > 1 && t.stride[i] % elems_per_vector != 0) {
      fail(arg, "stride " + std::to_string(t.stride[i]) + " of dimension " + std::to_string(i) +
                    " is not a multiple of " + std::to_string(elems_per_vector) + " elements (" +
                    std::to_string(kGpuAlignmentBytes) + " bytes), which the GPU paths require");
    }
  }
}

// A CUDA tensor's pointer must be device memory of the named device. Checked only when a
// runtime is present (cudaPointerGetAttributes does not synchronise, but it is skipped on
// the decode path anyway to keep that path lean).
void expect_pointer_on_device(const char* arg, const TensorView& t) {
  if (!t.present() || t.data == nullptr || t.device != DeviceKind::cuda) return;
  int found = -1;
  if (!cuda_pointer_on_device(t.data, &found)) {
    fail(arg, "is marked as a CUDA tensor on " + device_string(t) +
                  " but its pointer is not device memory");
  }
  if (found != t.device_index) {
    fail(arg, "is marked as on " + device_string(t) + " but its memory is on cuda:" +
                  std::to_string(found));
  }
}

void expect_float_dtype(const char* arg, const TensorView& t) {
  if (t.dtype != DType::bf16 && t.dtype != DType::fp16 && t.dtype != DType::fp32) {
    fail(arg, std::string("expected dtype bf16, fp16 or fp32, got ") + dtype_name(t.dtype),
         /*type_error=*/true);
  }
}

void expect_index_tensor(const char* arg, const TensorView& t, std::initializer_list<Dim> dims) {
  expect_dtype(arg, t, DType::int32);
  expect_shape(arg, t, dims);
  expect_unit_last_stride(arg, t);
}

// ---- reading index tensors -------------------------------------------------------------

// The elements [0, span) of an int32 tensor, in host memory. nullopt when they cannot be read
// without breaking the caller's contract: CUDA tensors when `device_reads` is off (decode), or
// while the stream is capturing a CUDA graph. Validation then trusts the contents; the kernels
// clamp every index they read to the tensor it indexes, so bad contents stay memory-safe on
// the GPU (they give wrong rows, not out-of-bounds accesses).
//
// Host code never dereferences t.data unless the tensor is marked as host memory: a CUDA
// tensor's elements arrive only through cuda_copy_to_host_if_not_capturing, and a device kind
// other than cpu/cuda is refused rather than read.
std::optional<std::vector<std::int32_t>> read_index(const char* arg, const TensorView& t, std::int64_t span,
                                                    bool device_reads, void* stream) {
  if (span <= 0) return std::vector<std::int32_t>{};
  if (t.data == nullptr) fail(arg, "null data pointer for a tensor of shape " + shape_string(t));
  std::vector<std::int32_t> host(static_cast<std::size_t>(span));
  if (t.device == DeviceKind::cpu) {
    std::memcpy(host.data(), t.data, host.size() * sizeof(std::int32_t));
    return host;
  }
  if (t.device != DeviceKind::cuda) fail(arg, "unknown device kind " + std::to_string(static_cast<int>(t.device)));
  if (!device_reads) return std::nullopt;
  if (!cuda_copy_to_host_if_not_capturing(host.data(), t.data, host.size() * sizeof(std::int32_t),
                                          stream)) {
    return std::nullopt;
  }
  return host;
}

// Elements spanned by a rank-1 or rank-2 index tensor with a unit last stride.
std::int64_t index_span(const TensorView& t) {
  if (t.numel() == 0) return 0;
  if (t.rank == 1) return t.shape[0];
  return (t.shape[0] - 1) * t.stride[0] + t.shape[1];
}

std::string indexed(const char* arg, std::int64_t i) { return std::string(arg) + "[" + std::to_string(i) + "]"; }

// cu_seqlens: non-negative, non-decreasing, the last entry equal to the rows of the tensor it
// indexes, every length within max_seqlen (the bound the GPU grid is sized by).
void check_cu_seqlens(const char* arg, const std::vector<std::int32_t>& cu, std::int64_t rows,
                      const char* rows_of, int max_seqlen, const char* max_arg) {
  for (std::size_t i = 0; i < cu.size(); ++i) {
    if (cu[i] < 0) fail(indexed(arg, i), "negative offset " + std::to_string(cu[i]));
    if (i > 0 && cu[i] < cu[i - 1]) {
      fail(indexed(arg, i), "offsets must be non-decreasing, got " + std::to_string(cu[i - 1]) +
                                " then " + std::to_string(cu[i]));
    }
    if (i > 0 && cu[i] - cu[i - 1] > max_seqlen) {
      fail(indexed(arg, i), "sequence " + std::to_string(i - 1) + " has " +
                                std::to_string(cu[i] - cu[i - 1]) + " tokens, more than " + max_arg +
                                " = " + std::to_string(max_seqlen));
    }
  }
  const std::int64_t last = cu.back();
  if (last != rows) {
    fail(indexed(arg, cu.size() - 1), "last offset " + std::to_string(last) +
                                          " must equal the number of rows of " + rows_of + " (" +
                                          std::to_string(rows) + ")");
  }
}

// ---- the shared attention validation ---------------------------------------------------

struct AttentionChecks {
  bool device_content_reads = true;  // read CUDA index tensors (off for decode)
  bool prefill_instantiation = true; // the GPU prefill kernels must exist for (dtype, D, Dv)
  bool pointer_attributes = true;    // ask the CUDA runtime where pointers live
  int max_seqlen_k_bound = -1;       // decode: the plan's bound on every seqlens_k entry
};

// sinks: optional, one fp32 logit per query head, contiguous, on q's device.
void check_sinks(const TensorView& sinks, std::int64_t heads_q, const TensorView& q) {
  if (!sinks.present()) return;
  check_pointer("sinks", sinks);
  expect_dtype("sinks", sinks, DType::fp32);
  expect_shape("sinks", sinks, {{heads_q, "heads_q"}});
  if (heads_q > 1 && sinks.stride[0] != 1) fail("sinks", "must be contiguous (stride 1), got stride " + std::to_string(sinks.stride[0]));
  expect_same_device("sinks", sinks, q, "q");
}

std::string instantiation_list() {
  const std::string archs = FLASHBUF_BUILD_ARCHS;
  if (archs == "none" || archs.empty()) return "none (this build has no CUDA)";
  const std::string list = FLASHBUF_BUILD_INSTANTIATIONS;
  return list.empty() ? "none" : list;
}

AttentionProblem validate_attention_impl(const AttentionArgs& a, const AttentionChecks& checks) {
  // Presence and pointers.
  require_present("q", a.q);
  require_present("k", a.k);
  require_present("v", a.v);
  require_present("o", a.o);
  const std::pair<const char*, const TensorView*> all[] = {
      {"q", &a.q},     {"k", &a.k},
      {"v", &a.v},     {"o", &a.o},
      {"lse", &a.lse}, {"cu_seqlens_q", &a.cu_seqlens_q},
      {"cu_seqlens_k", &a.cu_seqlens_k}, {"seqlens_k", &a.seqlens_k},
      {"page_table", &a.page_table}};
  for (const auto& [name, t] : all) check_pointer(name, *t);

  // Dtypes: one floating dtype for q, k, v, o; LSE fp32; indices int32 (checked with shapes).
  expect_float_dtype("q", a.q);
  const DType dtype = a.q.dtype;
  expect_same_dtype("k", a.k, "q", dtype);
  expect_same_dtype("v", a.v, "q", dtype);
  expect_same_dtype("o", a.o, "q", dtype);
  if (a.lse.present()) expect_dtype("lse", a.lse, DType::fp32);

  // Devices.
  for (const auto& [name, t] : all) expect_same_device(name, *t, a.q, "q");
  const bool gpu = a.q.device == DeviceKind::cuda;

  // Modes.
  const bool varlen_q = a.cu_seqlens_q.present();
  const bool varlen_k = a.cu_seqlens_k.present();
  const bool paged = a.page_table.present();
  if (paged && varlen_k) fail("cu_seqlens_k", "cannot be combined with page_table (paged K/V use seqlens_k)");
  if (varlen_k && a.seqlens_k.present()) fail("seqlens_k", "cannot be combined with cu_seqlens_k (varlen keys take their lengths from cu_seqlens_k)");
  if (paged && !a.seqlens_k.present()) fail("seqlens_k", "required with page_table: it gives each sequence's key count");
  if (a.max_seqlen_q < 0) fail("max_seqlen_q", "must not be negative, got " + std::to_string(a.max_seqlen_q));
  if (a.max_seqlen_k < 0) fail("max_seqlen_k", "must not be negative, got " + std::to_string(a.max_seqlen_k));

  // Queries and the batch size.
  std::int64_t batch = 0;
  std::int64_t seqlen_q = 0;
  if (varlen_q) {
    if (a.q.rank != 3) {
      fail("q", "expected rank 3 (total_q, heads_q, head_dim) with cu_seqlens_q, got shape " + shape_string(a.q));
    }
    if (a.cu_seqlens_q.rank != 1 || a.cu_seqlens_q.shape[0] < 1) {
      expect_index_tensor("cu_seqlens_q", a.cu_seqlens_q, {{kAny, "batch + 1"}});
      fail("cu_seqlens_q", "expected at least one entry (batch + 1), got shape " + shape_string(a.cu_seqlens_q));
    }
    batch = a.cu_seqlens_q.shape[0] - 1;
    expect_index_tensor("cu_seqlens_q", a.cu_seqlens_q, {{batch + 1, "batch + 1"}});
    if (a.max_seqlen_q <= 0) fail("max_seqlen_q", "required (> 0) with cu_seqlens_q: an upper bound on every query sequence's length");
  } else {
    if (a.q.rank != 4) {
      fail("q", "expected rank 4 (batch, seqlen_q, heads_q, head_dim), or rank 3 (total_q, heads_q, head_dim) with cu_seqlens_q; got shape " + shape_string(a.q));
    }
    batch = a.q.shape[0];
    seqlen_q = a.q.shape[1];
  }
  const int qd = a.q.rank - 3;  // index of the row dimension of q / o
  const std::int64_t rows_q = a.q.shape[qd];
  const std::int64_t heads_q = a.q.shape[qd + 1];
  const std::int64_t head_dim = a.q.shape[qd + 2];
  if (heads_q < 1) fail("q", "expected at least one head, got shape " + shape_string(a.q));
  if (head_dim < 1) fail("q", "expected head_dim >= 1, got shape " + shape_string(a.q));

  // Keys and values.
  std::int64_t heads_kv = 0;
  std::int64_t head_dim_v = 0;
  std::int64_t capacity_k = 0;  // keys per sequence the K/V tensors can hold (batch, paged)
  std::int64_t page_size = 0, num_pages = 0, max_pages = 0;
  if (paged) {
    if (a.k.rank != 4) fail("k", "expected rank 4 (num_pages, page_size, heads_kv, head_dim) with page_table, got shape " + shape_string(a.k));
    num_pages = a.k.shape[0];
    page_size = a.k.shape[1];
    heads_kv = a.k.shape[2];
    expect_shape("k", a.k, {{kAny, "num_pages"}, {kAny, "page_size"}, {kAny, "heads_kv"}, {head_dim, "head_dim"}});
    if (page_size < 1 || page_size > kMaxPageSize) {
      fail("k", "page size " + std::to_string(page_size) + " (dimension 1 of paged k) not supported: expected 1.." + std::to_string(kMaxPageSize));
    }
    expect_shape("v", a.v, {{num_pages, "num_pages"}, {page_size, "page_size"}, {heads_kv, "heads_kv"}, {kAny, "head_dim_v"}});
    head_dim_v = a.v.shape[3];
    if (a.page_table.rank != 2) {
      expect_index_tensor("page_table", a.page_table, {{batch, "batch"}, {kAny, "max_pages"}});
    }
    max_pages = a.page_table.shape[1];
    expect_index_tensor("page_table", a.page_table, {{batch, "batch"}, {kAny, "max_pages"}});
    capacity_k = max_pages * page_size;
  } else if (varlen_k) {
    if (a.k.rank != 3) fail("k", "expected rank 3 (total_k, heads_kv, head_dim) with cu_seqlens_k, got shape " + shape_string(a.k));
    heads_kv = a.k.shape[1];
    expect_shape("k", a.k, {{kAny, "total_k"}, {kAny, "heads_kv"}, {head_dim, "head_dim"}});
    expect_shape("v", a.v, {{a.k.shape[0], "total_k"}, {heads_kv, "heads_kv"}, {kAny, "head_dim_v"}});
    head_dim_v = a.v.shape[2];
    expect_index_tensor("cu_seqlens_k", a.cu_seqlens_k, {{batch + 1, "batch + 1"}});
    if (a.max_seqlen_k <= 0) fail("max_seqlen_k", "required (> 0) with cu_seqlens_k: an upper bound on every key sequence's length");
  } else {
    if (a.k.rank != 4) fail("k", "expected rank 4 (batch, seqlen_k, heads_kv, head_dim), rank 3 with cu_seqlens_k, or paged with page_table; got shape " + shape_string(a.k));
    heads_kv = a.k.shape[2];
    expect_shape("k", a.k, {{batch, "batch"}, {kAny, "seqlen_k"}, {kAny, "heads_kv"}, {head_dim, "head_dim"}});
    capacity_k = a.k.shape[1];
    expect_shape("v", a.v, {{batch, "batch"}, {capacity_k, "seqlen_k"}, {heads_kv, "heads_kv"}, {kAny, "head_dim_v"}});
    head_dim_v = a.v.shape[3];
  }
  if (a.seqlens_k.present()) expect_index_tensor("seqlens_k", a.seqlens_k, {{batch, "batch"}});
  if (heads_kv < 1) fail("k", "expected at least one head, got shape " + shape_string(a.k));
  if (head_dim_v < 1) fail("v", "expected head_dim_v >= 1, got shape " + shape_string(a.v));
  if (heads_q % heads_kv != 0) {
    fail("q", "heads_q = " + std::to_string(heads_q) + " is not a multiple of heads_kv = " +
                  std::to_string(heads_kv) + " (GQA/MQA share each K/V head among a whole group)");
  }

  // Outputs.
  if (varlen_q) {
    expect_shape("o", a.o, {{rows_q, "total_q"}, {heads_q, "heads_q"}, {head_dim_v, "head_dim_v"}});
    if (a.lse.present()) expect_shape("lse", a.lse, {{heads_q, "heads_q"}, {rows_q, "total_q"}});
  } else {
    expect_shape("o", a.o, {{batch, "batch"}, {seqlen_q, "seqlen_q"}, {heads_q, "heads_q"}, {head_dim_v, "head_dim_v"}});
    if (a.lse.present()) expect_shape("lse", a.lse, {{batch, "batch"}, {heads_q, "heads_q"}, {seqlen_q, "seqlen_q"}});
  }
  check_sinks(a.sinks, heads_q, a.q);

  // Strides and alignment.
  for (const auto& [name, t] : all) {
    if (t->present()) expect_unit_last_stride(name, *t);
  }
  expect_aligned("q", a.q, true);
  expect_aligned("k", a.k, true);
  expect_aligned("v", a.v, true);
  expect_aligned("o", a.o, true);
  expect_aligned("lse", a.lse, false);
  for (const auto& [name, t] : all) {
    if (t->dtype == DType::int32) expect_aligned(name, *t, false);
  }

  // What the device can run.
  if (gpu) {
    if (dtype == DType::fp32) {
      fail("q", "fp32 inputs are supported on the CPU only; the GPU kernels take bf16 or fp16", /*type_error=*/true);
    }
    if (checks.prefill_instantiation &&
        !prefill_instantiated(dtype, static_cast<int>(head_dim), static_cast<int>(head_dim_v))) {
      fail("q", "head_dim " + std::to_string(head_dim) + " with head_dim_v " + std::to_string(head_dim_v) +
                    " is not instantiated for " + dtype_name(dtype) + " on the GPU; built: " + instantiation_list());
    }
    if (checks.pointer_attributes && cuda_runtime_available()) {
      for (const auto& [name, t] : all) expect_pointer_on_device(name, *t);
    }
  }

  // Scalars.
  if (!std::isfinite(a.softmax_scale)) fail("softmax_scale", "must be finite, got " + std::to_string(a.softmax_scale));
  if (!std::isfinite(a.softcap) || a.softcap < 0.0f) fail("softcap", "must be finite and >= 0 (0 = off), got " + std::to_string(a.softcap));
  int window_left = -1, window_right = -1;
  switch (a.mask.kind) {
    case MaskKind::none: break;
    case MaskKind::causal: window_right = 0; break;
    case MaskKind::sliding_window:
      if (a.mask.window_left < -1) fail("mask.window_left", "expected >= -1 (-1 = unbounded), got " + std::to_string(a.mask.window_left));
      if (a.mask.window_right < -1) fail("mask.window_right", "expected >= -1 (-1 = unbounded), got " + std::to_string(a.mask.window_right));
      window_left = a.mask.window_left;
      window_right = a.mask.window_right;
      break;
    default: fail("mask.kind", "unknown mask kind " + std::to_string(static_cast<int>(a.mask.kind)));
  }

  // Bounds of the key lengths: the explicit max_seqlen_k may tighten the capacity (it sizes the
  // GPU grid); decode adds the plan's bound.
  std::int64_t max_seqlen_k = varlen_k ? a.max_seqlen_k : capacity_k;
  if (!varlen_k && a.max_seqlen_k > 0 && a.seqlens_k.present()) max_seqlen_k = std::min<std::int64_t>(max_seqlen_k, a.max_seqlen_k);
  if (checks.max_seqlen_k_bound >= 0) max_seqlen_k = std::min<std::int64_t>(max_seqlen_k, checks.max_seqlen_k_bound);
  if (capacity_k > std::numeric_limits<std::int32_t>::max()) fail("page_table", "max_pages * page_size exceeds the int32 range");

  // Contents of the index tensors.
  if (varlen_q) {
    if (auto cu = read_index("cu_seqlens_q", a.cu_seqlens_q, batch + 1, checks.device_content_reads, a.stream)) {
      check_cu_seqlens("cu_seqlens_q", *cu, rows_q, "q", a.max_seqlen_q, "max_seqlen_q");
    }
  }
  if (varlen_k) {
    if (auto cu = read_index("cu_seqlens_k", a.cu_seqlens_k, batch + 1, checks.device_content_reads, a.stream)) {
      check_cu_seqlens("cu_seqlens_k", *cu, a.k.shape[0], "k", a.max_seqlen_k, "max_seqlen_k");
    }
  }
  std::optional<std::vector<std::int32_t>> seqlens;
  if (a.seqlens_k.present()) {
    seqlens = read_index("seqlens_k", a.seqlens_k, batch, checks.device_content_reads, a.stream);
    if (seqlens) {
      for (std::int64_t b = 0; b < batch; ++b) {
        const std::int32_t s = (*seqlens)[b];
        if (s < 0) fail(indexed("seqlens_k", b), "negative key count " + std::to_string(s));
        if (s > capacity_k) {
          fail(indexed("seqlens_k", b), std::to_string(s) + " keys exceed the capacity of k (" +
                                            std::to_string(capacity_k) +
                                            (paged ? " = max_pages * page_size)" : " = seqlen_k)"));
        }
        if (s > max_seqlen_k) {
          fail(indexed("seqlens_k", b), std::to_string(s) + " keys exceed max_seqlen_k = " + std::to_string(max_seqlen_k));
        }
      }
    }
  }
  if (paged && seqlens) {
    if (auto table = read_index("page_table", a.page_table, index_span(a.page_table), checks.device_content_reads, a.stream)) {
      const std::int64_t row_stride = a.page_table.stride[0];
      for (std::int64_t b = 0; b < batch; ++b) {
        // Only the pages a sequence uses are read; the rest of its row may hold anything.
        const std::int64_t used = ((*seqlens)[b] + page_size - 1) / page_size;
        for (std::int64_t j = 0; j < used; ++j) {
          const std::int32_t page = (*table)[b * row_stride + j];
          if (page < 0 || page >= num_pages) {
            fail("page_table[" + std::to_string(b) + "][" + std::to_string(j) + "]",
                 "page index " + std::to_string(page) + " is outside the pool of " +
                     std::to_string(num_pages) + " pages");
          }
        }
      }
    }
  }

  // The normalised problem.
  AttentionProblem p;
  p.batch = static_cast<int>(batch);
  p.heads_q = static_cast<int>(heads_q);
  p.heads_kv = static_cast<int>(heads_kv);
  p.head_dim = static_cast<int>(head_dim);
  p.head_dim_v = static_cast<int>(head_dim_v);
  p.max_seqlen_q = varlen_q ? a.max_seqlen_q : static_cast<int>(seqlen_q);
  p.max_seqlen_k = static_cast<int>(max_seqlen_k);
  p.seqlen_q = static_cast<int>(seqlen_q);
  p.seqlen_k = varlen_k ? 0 : static_cast<int>(capacity_k);  // with seqlens_k: the capacity
  p.dtype = dtype;
  p.device = a.q.device;
  p.device_index = a.q.device_index;

  p.q = a.q.data;
  p.q_batch_stride = varlen_q ? 0 : a.q.stride[0];
  p.q_row_stride = a.q.stride[qd];
  p.q_head_stride = a.q.stride[qd + 1];
  const int kd = a.k.rank - 3;
  p.k = a.k.data;
  p.k_batch_stride = varlen_k ? 0 : a.k.stride[0];
  p.k_row_stride = a.k.stride[kd];
  p.k_head_stride = a.k.stride[kd + 1];
  p.v = a.v.data;
  p.v_batch_stride = varlen_k ? 0 : a.v.stride[0];
  p.v_row_stride = a.v.stride[kd];
  p.v_head_stride = a.v.stride[kd + 1];
  p.o = a.o.data;
  p.o_batch_stride = varlen_q ? 0 : a.o.stride[0];
  p.o_row_stride = a.o.stride[qd];
  p.o_head_stride = a.o.stride[qd + 1];
  if (a.lse.present()) {
    p.lse = static_cast<float*>(a.lse.data);
    p.lse_batch_stride = varlen_q ? 0 : a.lse.stride[0];
    p.lse_head_stride = a.lse.stride[varlen_q ? 0 : 1];
  }
  p.cu_seqlens_q = static_cast<const std::int32_t*>(a.cu_seqlens_q.data);
  p.cu_seqlens_k = static_cast<const std::int32_t*>(a.cu_seqlens_k.data);
  if (varlen_k) p.total_k = a.k.shape[0];
  if (varlen_q) p.total_q = a.q.shape[0];
  p.seqlens_k = static_cast<const std::int32_t*>(a.seqlens_k.data);
  if (paged) {
    p.page_table = static_cast<const std::int32_t*>(a.page_table.data);
    p.page_table_stride = a.page_table.stride[0];
    p.page_size = static_cast<int>(page_size);
    p.num_pages = static_cast<int>(num_pages);
  }
  p.softmax_scale = a.softmax_scale != 0.0f ? a.softmax_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  p.softcap = a.softcap;
  if (a.sinks.present()) p.sinks = static_cast<const float*>(a.sinks.data);
  // A window at least as wide as every sequence binds nothing, and becomes unbounded (-1): the
  // masks' index arithmetic adds windows to key positions in int, where diag + INT_MAX
  // overflowed and hid every key. Left: keys >= diag - w and diag <= seqlen_k - 1; right: keys
  // <= diag + w and diag >= seqlen_k - seqlen_q.
  p.window_left = window_left >= p.max_seqlen_k ? -1 : window_left;
  p.window_right = window_right >= p.max_seqlen_q ? -1 : window_right;
  p.stream = a.stream;
  return p;
}

}  // namespace

std::string shape_string(const TensorView& view) {
  std::ostringstream s;
  s << "(";
  for (int i = 0; i < view.rank && i < kMaxRank; ++i) s << (i ? ", " : "") << view.shape[i];
  s << ")";
  return s.str();
}

AttentionProblem validate_attention(const AttentionArgs& args) {
  return validate_attention_impl(args, AttentionChecks{});
}

void validate_decode_problem(const DecodeProblem& p) {
  auto range = [](const char* arg, int value, int lo, int hi, const char* why) {
    if (value < lo || value > hi) {
      fail(arg, "expected " + std::to_string(lo) + (hi == std::numeric_limits<int>::max() ? std::string(" or more") : ".." + std::to_string(hi)) +
                    " (" + why + "), got " + std::to_string(value));
    }
  };
  constexpr int kNoLimit = std::numeric_limits<int>::max();
  range("problem.batch", p.batch, 0, kNoLimit, "sequences; 0 is allowed and does nothing");
  range("problem.q_per_seq", p.q_per_seq, 1, kMaxQueriesPerSequence, "query tokens per sequence");
  range("problem.heads_q", p.heads_q, 1, kNoLimit, "query heads");
  range("problem.heads_kv", p.heads_kv, 1, kNoLimit, "key/value heads");
  if (p.heads_q % p.heads_kv != 0) {
    fail("problem.heads_q", std::to_string(p.heads_q) + " is not a multiple of heads_kv = " + std::to_string(p.heads_kv));
  }
  range("problem.head_dim", p.head_dim, 1, kNoLimit, "query/key head dimension");
  range("problem.head_dim_v", p.head_dim_v, 1, kNoLimit, "value head dimension");
  range("problem.max_seqlen_k", p.max_seqlen_k, 0, kNoLimit, "bound on any sequence's key count");
  if (p.page_size != 0) range("problem.page_size", p.page_size, 1, kMaxPageSize, "tokens per page; 0 = contiguous cache");
  if (p.dtype != DType::bf16 && p.dtype != DType::fp16 && p.dtype != DType::fp32) {
    fail("problem.dtype", std::string("expected bf16, fp16 or fp32, got ") + dtype_name(p.dtype), true);
  }
  if (p.device == DeviceKind::cuda && p.dtype == DType::fp32) {
    fail("problem.dtype", "fp32 is supported on the CPU only; the GPU decode takes bf16 or fp16", true);
  }
  if (p.device != DeviceKind::cpu && p.device != DeviceKind::cuda) fail("problem.device", "unknown device kind");
}

AttentionProblem validate_decode(const DecodePlan& plan, const DecodeArgs& d) {
  const DecodeProblem& pr = plan.problem;
  validate_decode_problem(pr);
  require_present("q", d.q);
  require_present("seqlens_k", d.seqlens_k);
  check_pointer("q", d.q);
  expect_float_dtype("q", d.q);
  if (d.q.dtype != pr.dtype) {
    fail("q", std::string("dtype ") + dtype_name(d.q.dtype) + " does not match the plan's " + dtype_name(pr.dtype), true);
  }
  if (d.q.device != pr.device || (pr.device == DeviceKind::cuda && d.q.device_index != pr.device_index)) {
    fail("q", "is on " + device_string(d.q) + " but the plan is for " + device_string(pr.device, pr.device_index));
  }
  expect_shape("q", d.q, {{pr.batch, "batch"}, {pr.q_per_seq, "q_per_seq"}, {pr.heads_q, "heads_q"}, {pr.head_dim, "head_dim"}});
  if ((pr.page_size > 0) != d.page_table.present()) {
    fail("page_table", pr.page_size > 0 ? "required: the plan is for a paged cache (page_size " + std::to_string(pr.page_size) + ")"
                                        : "given, but the plan is for a contiguous cache (page_size 0)");
  }
  if (pr.page_size > 0) {
    expect_shape("k", d.k, {{kAny, "num_pages"}, {pr.page_size, "page_size"}, {pr.heads_kv, "heads_kv"}, {pr.head_dim, "head_dim"}});
  } else {
    expect_shape("k", d.k, {{pr.batch, "batch"}, {kAny, "max_seqlen_k"}, {pr.heads_kv, "heads_kv"}, {pr.head_dim, "head_dim"}});
  }
  expect_shape("v", d.v, {{d.k.shape[0], d.page_table.present() ? "num_pages" : "batch"}, {d.k.shape[1], d.page_table.present() ? "page_size" : "max_seqlen_k"}, {pr.heads_kv, "heads_kv"}, {pr.head_dim_v, "head_dim_v"}});
  if (plan.num_splits < 1) fail("plan.num_splits", "expected >= 1, got " + std::to_string(plan.num_splits) + " (use plan_decode)");
  if (plan.workspace_bytes > 0) {
    if (d.workspace == nullptr) fail("workspace", "null, but the plan needs " + std::to_string(plan.workspace_bytes) + " bytes");
    if (reinterpret_cast<std::uintptr_t>(d.workspace) % kWorkspaceAlignment != 0) {
      fail("workspace", "must be " + std::to_string(kWorkspaceAlignment) + "-byte aligned");
    }
  }

  AttentionArgs a;
  a.q = d.q;
  a.k = d.k;
  a.v = d.v;
  a.o = d.o;
  a.lse = d.lse;
  a.seqlens_k = d.seqlens_k;
  a.page_table = d.page_table;
  a.softmax_scale = d.softmax_scale;
  a.mask = d.mask;
  a.softcap = d.softcap;
  a.sinks = d.sinks;
  a.stream = d.stream;
  AttentionChecks checks;
  checks.device_content_reads = false;   // no synchronisation on the decode path
  checks.prefill_instantiation = false;  // the decode kernels have their own list (cuda_plan_decode)
  checks.pointer_attributes = false;
  checks.max_seqlen_k_bound = pr.max_seqlen_k;
  AttentionProblem p = validate_attention_impl(a, checks);
  p.max_seqlen_k = pr.max_seqlen_k;  // the launch shape comes from the plan
  return p;
}

MergeProblem validate_merge(const MergeStatesArgs& a) {
  require_present("o_parts", a.o_parts);
  require_present("lse_parts", a.lse_parts);
  require_present("o", a.o);
  const std::pair<const char*, const TensorView*> all[] = {
      {"o_parts", &a.o_parts}, {"lse_parts", &a.lse_parts}, {"o", &a.o}, {"lse", &a.lse}};
  for (const auto& [name, t] : all) check_pointer(name, *t);
  expect_float_dtype("o_parts", a.o_parts);
  expect_same_dtype("o", a.o, "o_parts", a.o_parts.dtype);
  expect_dtype("lse_parts", a.lse_parts, DType::fp32);
  if (a.lse.present()) expect_dtype("lse", a.lse, DType::fp32);
  for (const auto& [name, t] : all) expect_same_device(name, *t, a.o_parts, "o_parts");

  if (a.o_parts.rank != 4) fail("o_parts", "expected rank 4 (num_parts, tokens, heads, head_dim_v), got shape " + shape_string(a.o_parts));
  const std::int64_t n = a.o_parts.shape[0], t = a.o_parts.shape[1], h = a.o_parts.shape[2], dv = a.o_parts.shape[3];
  if (n < 1) fail("o_parts", "expected at least one part, got shape " + shape_string(a.o_parts));
  expect_shape("lse_parts", a.lse_parts, {{n, "num_parts"}, {t, "tokens"}, {h, "heads"}});
  expect_shape("o", a.o, {{t, "tokens"}, {h, "heads"}, {dv, "head_dim_v"}});
  if (a.lse.present()) expect_shape("lse", a.lse, {{t, "tokens"}, {h, "heads"}});
  // O rows are read and written as vectors; the LSE views may have any strides, so that
  // attention's (N, H, T) LSE passes as its transposed view without a copy.
  expect_unit_last_stride("o_parts", a.o_parts);
  expect_unit_last_stride("o", a.o);
  expect_aligned("o_parts", a.o_parts, true);
  expect_aligned("o", a.o, true);
  expect_aligned("lse_parts", a.lse_parts, false);
  expect_aligned("lse", a.lse, false);
  if (a.o_parts.device == DeviceKind::cuda && cuda_runtime_available()) {
    for (const auto& [name, tv] : all) expect_pointer_on_device(name, *tv);
  }

  MergeProblem p;
  p.num_parts = static_cast<int>(n);
  p.tokens = static_cast<int>(t);
  p.heads = static_cast<int>(h);
  p.head_dim_v = static_cast<int>(dv);
  p.dtype = a.o_parts.dtype;
  p.device = a.o_parts.device;
  p.device_index = a.o_parts.device_index;
  p.o_parts = a.o_parts.data;
  p.op_part_stride = a.o_parts.stride[0];
  p.op_token_stride = a.o_parts.stride[1];
  p.op_head_stride = a.o_parts.stride[2];
  p.lse_parts = static_cast<const float*>(a.lse_parts.data);
  p.lp_part_stride = a.lse_parts.stride[0];
  p.lp_token_stride = a.lse_parts.stride[1];
  p.lp_head_stride = a.lse_parts.stride[2];
  p.o = a.o.data;
  p.o_token_stride = a.o.stride[0];
  p.o_head_stride = a.o.stride[1];
  if (a.lse.present()) {
    p.lse = static_cast<float*>(a.lse.data);
    p.lse_token_stride = a.lse.stride[0];
    p.lse_head_stride = a.lse.stride[1];
  }
  p.stream = a.stream;
  return p;
}

}  // namespace flashbuf::detail
