// API layer: validation of attention, decode and merge_states arguments (see validate.hpp).
//
// Order of the checks: presence and null pointers, dtypes, devices, ranks and shapes, strides,
// alignment, what the chosen device can run, derived sizes, scalars, memory overlap of the
// outputs, and last the contents of the index tensors. Every failure is an ArgumentError
// naming the argument; nothing is ever written. docs/errors.md lists the cases.
//
// Messages are built from std::string and std::to_string only, never iostreams: a host
// process may install a global C++ locale (some CUDA libraries loaded by PyTorch do), and a
// stream imbued with it formats numbers with that locale's grouping, or worse, runs facets of
// another libstdc++ copy.
#include "api/validate.hpp"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
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
// Head dims of 1..kMaxHeadDim: the CPU backend's per-thread scratch grows by about 3 KB a
// head-dim element (a 16-million one would ask for 48 GB a thread), and the GPU kernels stop
// at 256 anyway.
constexpr std::int64_t kMaxHeadDim = 16384;
// Every backend indexes rows, keys and packed (row, head) pairs in int and steps past them by
// at most a tile (<= 256) or adds a window to a key position: the sizes those indices reach
// must stay this far below INT32_MAX.
constexpr std::int64_t kIndexSlack = 1024;
constexpr std::int64_t kMaxIndex = std::numeric_limits<std::int32_t>::max() - kIndexSlack;
// CUDA grids: y and z are at most 65535 (the prefill grid is (query blocks, heads, batch), the
// decode grid (splits, kv heads x row chunks, batch)).
constexpr std::int64_t kMaxGridYZ = 65535;
// The combine runs one warp per (token, head), four warps a block, in a one-dimensional grid.
constexpr std::int64_t kMaxCombineRows = 4 * static_cast<std::int64_t>(std::numeric_limits<std::int32_t>::max());
// log2(e): the kernels multiply scale and softcap by it once, so it must not overflow.
constexpr float kLog2eHost = 1.4426950408889634f;
constexpr float kMaxScaleOrCap = std::numeric_limits<float>::max() / kLog2eHost;

constexpr std::int64_t kAny = -1;  // a shape extent that is not constrained

struct Dim {
  std::int64_t extent;  // kAny: free
  const char* name;
};

std::string device_string(DeviceKind device, int index) {
  return device == DeviceKind::cpu ? std::string("cpu") : "cuda:" + std::to_string(index);
}
std::string device_string(const TensorView& t) { return device_string(t.device, t.device_index); }

std::string number(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

std::string strides_string(const TensorView& t) {
  std::string s = "(";
  for (int i = 0; i < t.rank && i < kMaxRank; ++i) s += (i ? ", " : "") + std::to_string(t.stride[i]);
  return s + ")";
}

[[noreturn]] void fail(const std::string& arg, const std::string& what, bool type_error = false) {
  throw ArgumentError(arg, what, type_error);
}

void require_present(const char* arg, const TensorView& t) {
  if (!t.present()) fail(arg, "required tensor is missing (rank 0)");
}

bool empty(const TensorView& t) { return t.present() && t.numel() == 0; }

// Elements from a view's first to one past its last addressed element; 0 when empty. Every
// product is checked so that no later offset computation can overflow int64.
std::int64_t element_span(const char* arg, const TensorView& t) {
  if (!t.present() || t.numel() == 0) return 0;
  std::int64_t last = 0;
  for (int i = 0; i < t.rank; ++i) {
    std::int64_t reach = 0;
    if (__builtin_mul_overflow(t.shape[i] - 1, t.stride[i], &reach) || __builtin_add_overflow(last, reach, &last)) {
      fail(arg, "shape " + shape_string(t) + " with strides " + strides_string(t) + " spans more than 2^63 elements");
    }
  }
  std::int64_t bytes = 0;
  if (__builtin_mul_overflow(last + 1, static_cast<std::int64_t>(dtype_size(t.dtype)), &bytes)) {
    fail(arg, "shape " + shape_string(t) + " with strides " + strides_string(t) + " spans more than 2^63 bytes");
  }
  return last + 1;
}

// Rank, extents, strides and the pointer. An empty tensor (e.g. zero total tokens) may have a
// null pointer (allocators return one for zero bytes) and any strides (NumPy 2 gives empty
// arrays zero strides): nothing is addressed through it.
void check_pointer(const char* arg, const TensorView& t, bool metadata_only) {
  if (t.rank < 0 || t.rank > kMaxRank) {
    fail(arg, "rank " + std::to_string(t.rank) + " is outside 0.." + std::to_string(kMaxRank));
  }
  if (t.rank == 0 && t.data != nullptr) {  // an absent tensor, or one whose shape was left out?
    fail(arg, "rank 0 (absent) but a data pointer is set: give its shape, or a null pointer to leave it out");
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
  // The element count must not wrap: a count that wraps to 0 would make the tensor look empty,
  // and an empty tensor skips the pointer, span and overlap checks.
  std::int64_t count = t.rank > 0 ? 1 : 0;
  bool zero_extent = false;
  for (int i = 0; i < t.rank; ++i) zero_extent = zero_extent || t.shape[i] == 0;
  for (int i = 0; i < t.rank && !zero_extent; ++i) {
    if (__builtin_mul_overflow(count, t.shape[i], &count)) {
      fail(arg, "shape " + shape_string(t) + " has more than 2^63 elements");
    }
  }
  if (t.present() && t.dtype != DType::bf16 && t.dtype != DType::fp16 && t.dtype != DType::fp32 &&
      t.dtype != DType::int32) {
    fail(arg, "unknown dtype code " + std::to_string(static_cast<int>(t.dtype)), /*type_error=*/true);
  }
  if (t.present() && t.device != DeviceKind::cpu && t.device != DeviceKind::cuda) {
    fail(arg, "unknown device kind " + std::to_string(static_cast<int>(t.device)));
  }
  element_span(arg, t);
  if (!metadata_only && t.present() && t.data == nullptr && t.numel() > 0) {
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

// `family`: the tensors that share one dtype, for the message.
void expect_same_dtype(const char* arg, const TensorView& t, const char* ref_arg, DType ref,
                       const char* family = "q, k, v and o") {
  if (t.dtype != ref) {
    fail(arg,
         std::string("dtype ") + dtype_name(t.dtype) + " does not match " + ref_arg + "'s " +
             dtype_name(ref) + " (all of " + family + " share one dtype)",
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
  // Free extents print as the tensor's own extent when the rank is right (so the expected
  // shape is concrete and differs from the actual one only where it must), else as names.
  const bool same_rank = t.rank == static_cast<int>(dims.size());
  std::string expected = "expected shape (";
  i = 0;
  for (const Dim& d : dims) {
    if (i) expected += ", ";
    if (d.extent != kAny) {
      expected += std::to_string(d.extent);
    } else if (same_rank) {
      expected += std::to_string(t.shape[i]);
    } else {
      expected += d.name;
    }
    ++i;
  }
  expected += ") [";
  i = 0;
  for (const Dim& d : dims) expected += std::string(i++ ? ", " : "") + d.name;
  expected += "], got " + (t.present() ? shape_string(t) : std::string("nothing (rank 0)"));
  fail(arg, expected);
}

// The last dimension must be dense: every kernel reads rows as contiguous vectors.
void expect_unit_last_stride(const char* arg, const TensorView& t) {
  const int last = t.rank - 1;
  if (last >= 0 && !empty(t) && t.shape[last] > 1 && t.stride[last] != 1) {
    fail(arg, "stride not supported: the last dimension must be contiguous (stride 1), got strides " +
                  strides_string(t));
  }
}

// CPU: element alignment. CUDA: 16-byte base pointers and, for tensors the kernels read with
// vector accesses, strides that are multiples of 16 bytes (8 elements of bf16/fp16).
void expect_aligned(const char* arg, const TensorView& t, bool vector_access, bool metadata_only) {
  if (!t.present() || empty(t)) return;
  const std::size_t elem = dtype_size(t.dtype);
  const bool gpu = t.device == DeviceKind::cuda && vector_access;
  const std::size_t align = gpu ? kGpuAlignmentBytes : elem;
  const auto address = reinterpret_cast<std::uintptr_t>(t.data);
  if (!metadata_only && t.data != nullptr && address % align != 0) {
    char hex[32];
    std::snprintf(hex, sizeof hex, "0x%" PRIxPTR, address);
    fail(arg, std::string("unaligned data pointer ") + hex + ": expected a multiple of " + std::to_string(align) +
                  " bytes" + (gpu ? " on the GPU" : std::string(" (the ") + dtype_name(t.dtype) + " element size)"));
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
  // An empty tensor is never read, and allocators hand out any pointer (or none) for it.
  if (!t.present() || empty(t) || t.data == nullptr || t.device != DeviceKind::cuda) return;
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

// Whether the dimensions (extents, strides in elements) address every element once. Sufficient
// test: with the dimensions sorted by stride, each stride exceeds the reach of the smaller ones.
bool addresses_each_element_once(int rank, const std::int64_t* shape, const std::int64_t* stride) {
  int order[kMaxRank + 1];
  int n = 0;
  for (int i = 0; i < rank; ++i) {
    if (shape[i] > 1) order[n++] = i;
  }
  std::sort(order, order + n, [&](int a, int b) { return stride[a] < stride[b]; });
  std::int64_t reach = 0;  // largest offset reachable through the dimensions so far
  for (int j = 0; j < n; ++j) {
    const int i = order[j];
    if (stride[i] <= reach) return false;
    reach += (shape[i] - 1) * stride[i];
  }
  return true;
}

// The rows of a page (dimension 1 of a paged cache `arg`): 1..kMaxPageSize, what the kernels read.
void expect_page_size(const char* arg, std::int64_t page_size) {
  if (page_size < 1 || page_size > kMaxPageSize) {
    fail(arg, "page size " + std::to_string(page_size) + " (dimension 1 of paged " + arg +
                  ") not supported: expected 1.." + std::to_string(kMaxPageSize));
  }
}

// An output must hold one element per address: a broadcast (stride-0) or otherwise
// self-overlapping view would have several rows written to one place.
void expect_no_internal_overlap(const char* arg, const TensorView& t) {
  if (!t.present() || empty(t)) return;
  if (!addresses_each_element_once(t.rank, t.shape, t.stride)) {
    fail(arg, "shape " + shape_string(t) + " with strides " + strides_string(t) +
                  " addresses some elements more than once (a broadcast or stride-0 view); an output needs "
                  "one element per address");
  }
}

struct Named {
  const char* name;
  const TensorView* view;
};

// Outputs must not share memory with any input (or each other): the kernels read inputs while
// outputs are written, so out=k gives wrong numbers. Byte ranges are compared, so two views
// interleaved in one buffer count as overlapping too.
void expect_disjoint(const Named& out, std::initializer_list<Named> others) {
  const TensorView& o = *out.view;
  if (!o.present() || empty(o) || o.data == nullptr) return;
  const auto o_lo = reinterpret_cast<std::uintptr_t>(o.data);
  const auto o_hi = o_lo + static_cast<std::uintptr_t>(element_span(out.name, o)) * dtype_size(o.dtype);
  for (const Named& other : others) {
    const TensorView& t = *other.view;
    if (!t.present() || empty(t) || t.data == nullptr || t.device != o.device) continue;
    const auto lo = reinterpret_cast<std::uintptr_t>(t.data);
    const auto hi = lo + static_cast<std::uintptr_t>(element_span(other.name, t)) * dtype_size(t.dtype);
    if (lo < o_hi && o_lo < hi) {
      fail(out.name, std::string("shares memory with ") + other.name +
                         " (an output may not overlap an input or another output: the kernels read " + other.name +
                         " while " + out.name + " is written)");
    }
  }
}

// Two outputs of one shape but the last extent, taking turns in one buffer: a KV pool of
// (pages, 2, page, heads, D) split into K and V at dimension 1, or (B, S, 2, heads, D) at
// dimension 2. Their byte ranges overlap while their elements do not, so expect_disjoint would
// refuse them. Exact for that layout: the two views as one with a leading dimension of extent 2
// whose stride is the distance between their first elements (same dtype, same strides outside
// the last dimension), over the longer last extent, must address every element once.
bool interleaved_apart(const TensorView& a, const TensorView& b) {
  if (a.dtype != b.dtype || a.rank != b.rank || a.rank > kMaxRank || a.data == nullptr || b.data == nullptr) {
    return false;
  }
  const std::ptrdiff_t bytes = static_cast<const char*>(b.data) - static_cast<const char*>(a.data);
  const std::ptrdiff_t size = static_cast<std::ptrdiff_t>(dtype_size(a.dtype));
  if (bytes % size != 0) return false;
  std::int64_t shape[kMaxRank + 1], stride[kMaxRank + 1];
  shape[0] = 2, stride[0] = std::abs(bytes / size);
  for (int i = 0; i < a.rank; ++i) {
    const bool last = i == a.rank - 1;
    if (!last && (a.shape[i] != b.shape[i] || a.stride[i] != b.stride[i])) return false;
    if (last && a.stride[i] != b.stride[i]) return false;
    shape[i + 1] = last ? std::max(a.shape[i], b.shape[i]) : a.shape[i];
    stride[i + 1] = a.stride[i];
  }
  return addresses_each_element_once(a.rank + 1, shape, stride);
}

// ---- reading index tensors -------------------------------------------------------------

struct AttentionChecks {
  bool outputs = true;                // check o and lse (off: the *_output_shapes functions)
  bool metadata_only = false;         // CheckScope::metadata: no pointer is looked at
  bool device_content_reads = false;  // read CUDA index tensors (check_index_contents)
  bool prefill_instantiation = true;  // the GPU prefill kernels must exist for (dtype, D, Dv)
  bool pointer_attributes = true;     // ask the CUDA runtime where pointers live
  int max_seqlen_k_bound = -1;        // decode: the plan's bound on every seqlens_k entry
};

// `rows` runs of `cols` int32 elements, `row_stride` elements apart, packed in host memory, or
// nullopt when they are not to be read: metadata-only checks, and CUDA tensors unless the
// caller asked for the check (it copies and synchronises) and the stream is not capturing a
// graph. Validation then trusts the contents; the kernels clamp every offset, length and page
// index they read to the tensors they index, so bad contents give wrong rows, never
// out-of-bounds accesses. row_stride >= cols (or rows == 1): only the runs are read, never the
// memory between them, which need not be the caller's.
//
// Host code never dereferences t.data unless the tensor is marked as host memory: a CUDA
// tensor's elements arrive only through cuda_copy_rows_to_host_if_not_capturing, one pitched
// copy and one synchronisation however many rows.
std::optional<std::vector<std::int32_t>> read_runs(const char* arg, const TensorView& t, std::int64_t rows,
                                                   std::int64_t cols, std::int64_t row_stride,
                                                   const AttentionChecks& checks, void* stream) {
  if (checks.metadata_only) return std::nullopt;
  if (rows <= 0 || cols <= 0) return std::vector<std::int32_t>{};
  if (t.data == nullptr) fail(arg, "null data pointer for a tensor of shape " + shape_string(t));
  if (rows == 1) row_stride = cols;
  std::vector<std::int32_t> host(static_cast<std::size_t>(rows * cols));
  const std::size_t row_bytes = static_cast<std::size_t>(cols) * sizeof(std::int32_t);
  if (t.device == DeviceKind::cpu) {
    for (std::int64_t r = 0; r < rows; ++r) {
      std::memcpy(host.data() + r * cols, static_cast<const std::int32_t*>(t.data) + r * row_stride, row_bytes);
    }
    return host;
  }
  if (!checks.device_content_reads) return std::nullopt;
  if (!cuda_copy_rows_to_host_if_not_capturing(host.data(), t.data, row_bytes, static_cast<std::size_t>(rows),
                                               static_cast<std::size_t>(row_stride) * sizeof(std::int32_t),
                                               stream)) {
    return std::nullopt;
  }
  return host;
}

// The elements [0, span) of an int32 tensor (offsets, lengths), as read_runs says.
std::optional<std::vector<std::int32_t>> read_index(const char* arg, const TensorView& t, std::int64_t span,
                                                    const AttentionChecks& checks, void* stream) {
  return read_runs(arg, t, 1, span, span, checks, stream);
}

// The rows of a rank-2 int32 tensor with a unit last stride (a page table), packed row after
// row, as read_runs says. Rows apart (a slice of a wider table) are read as runs, never the
// memory between them; rows that overlap (a stride below the row, 0 for a broadcast table)
// cover one span, which is exactly the memory the view addresses, read once and unpacked.
std::optional<std::vector<std::int32_t>> read_index_rows(const char* arg, const TensorView& t,
                                                         const AttentionChecks& checks, void* stream) {
  const std::int64_t rows = t.shape[0], cols = t.shape[1], stride = t.stride[0];
  if (rows <= 1 || cols == 0 || stride >= cols) return read_runs(arg, t, rows, cols, stride, checks, stream);
  auto span = read_index(arg, t, (rows - 1) * stride + cols, checks, stream);
  if (!span) return std::nullopt;
  std::vector<std::int32_t> packed(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    std::copy_n(span->begin() + r * stride, cols, packed.begin() + r * cols);
  }
  return packed;
}

std::string indexed(const char* arg, std::int64_t i) { return std::string(arg) + "[" + std::to_string(i) + "]"; }

// cu_seqlens: starting at 0, non-decreasing, the last entry equal to the rows of the tensor it
// indexes, every length within max_seqlen when one was given (the bound the GPU grid is sized
// by; 0 = derived). Returns the longest sequence.
std::int64_t check_cu_seqlens(const char* arg, const std::vector<std::int32_t>& cu, std::int64_t rows,
                              const char* rows_of, int max_seqlen, const char* max_arg) {
  if (cu[0] != 0) {
    fail(indexed(arg, 0), "must be 0 (the offset of the first sequence), got " + std::to_string(cu[0]));
  }
  std::int64_t longest = 0;
  for (std::size_t i = 1; i < cu.size(); ++i) {
    if (cu[i] < cu[i - 1]) {
      fail(indexed(arg, i), "offsets must be non-decreasing, got " + std::to_string(cu[i - 1]) +
                                " then " + std::to_string(cu[i]));
    }
    const std::int64_t len = static_cast<std::int64_t>(cu[i]) - cu[i - 1];
    if (max_seqlen > 0 && len > max_seqlen) {
      fail(indexed(arg, i), "sequence " + std::to_string(i - 1) + " has " + std::to_string(len) +
                                " tokens, more than " + max_arg + " = " + std::to_string(max_seqlen));
    }
    longest = std::max(longest, len);
  }
  const std::int64_t last = cu.back();
  if (last != rows) {
    fail(indexed(arg, cu.size() - 1), "last offset " + std::to_string(last) +
                                          " must equal the number of rows of " + rows_of + " (" +
                                          std::to_string(rows) + ")");
  }
  return longest;
}

// ---- the shared attention validation ---------------------------------------------------

std::string instantiation_list() {
  const std::string archs = FLASHBUF_BUILD_ARCHS;
  if (archs == "none" || archs.empty()) return "none (this build has no CUDA)";
  const std::string list = FLASHBUF_BUILD_INSTANTIATIONS;
  return list.empty() ? "none" : list;
}

void check_num_threads(int num_threads) {
  if (num_threads < 0) fail("num_threads", "must be >= 0 (0 = the library's default), got " + std::to_string(num_threads));
}

// softmax_scale > 0 (0 = default) and softcap 0 or in range: the kernels fold scale * log2 e
// (or softcap * log2 e) into one fp32 factor and take the row maximum of the raw scores before
// scaling, which is only right for a positive scale; softcap divides the scale.
void check_scalars(float softmax_scale, float softcap, float effective_scale) {
  if (!std::isfinite(softmax_scale) || softmax_scale < 0.0f || softmax_scale > kMaxScaleOrCap) {
    fail("softmax_scale", "must be finite, > 0 and at most " + number(kMaxScaleOrCap) +
                              " (0 means 1/sqrt(head_dim)), got " + number(softmax_scale));
  }
  if (softcap == 0.0f) return;
  if (!std::isfinite(softcap) || softcap < std::numeric_limits<float>::min() || softcap > kMaxScaleOrCap) {
    fail("softcap", "must be 0 (off) or in [" + number(std::numeric_limits<float>::min()) + ", " +
                        number(kMaxScaleOrCap) + "], got " + number(softcap));
  }
  if (!std::isfinite(effective_scale / softcap)) {
    fail("softcap", number(softcap) + " is too small for softmax_scale " + number(effective_scale) +
                        ": softmax_scale / softcap overflows fp32");
  }
}

void check_sinks(const TensorView& sinks, const TensorView& q, std::int64_t heads_q, bool metadata_only) {
  if (!sinks.present()) return;
  expect_dtype("sinks", sinks, DType::fp32);
  expect_same_device("sinks", sinks, q, "q");
  expect_shape("sinks", sinks, {{heads_q, "heads_q"}});
  expect_unit_last_stride("sinks", sinks);
  expect_aligned("sinks", sinks, false, metadata_only);
}

AttentionProblem validate_attention_impl(const AttentionArgs& a, const AttentionChecks& checks) {
  const bool meta = checks.metadata_only;
  const TensorView o = checks.outputs ? a.o : TensorView{};
  const TensorView lse = checks.outputs ? a.lse : TensorView{};
  // Presence and pointers.
  require_present("q", a.q);
  require_present("k", a.k);
  require_present("v", a.v);
  if (checks.outputs) require_present("o", o);
  const Named all[] = {{"q", &a.q},
                       {"k", &a.k},
                       {"v", &a.v},
                       {"o", &o},
                       {"lse", &lse},
                       {"cu_seqlens_q", &a.cu_seqlens_q},
                       {"cu_seqlens_k", &a.cu_seqlens_k},
                       {"seqlens_k", &a.seqlens_k},
                       {"page_table", &a.page_table},
                       {"sinks", &a.sinks}};
  for (const auto& [name, t] : all) check_pointer(name, *t, meta);

  // Dtypes: one floating dtype for q, k, v, o; LSE and sinks fp32; indices int32 (checked
  // with their shapes).
  expect_float_dtype("q", a.q);
  const DType dtype = a.q.dtype;
  expect_same_dtype("k", a.k, "q", dtype);
  expect_same_dtype("v", a.v, "q", dtype);
  if (o.present()) expect_same_dtype("o", o, "q", dtype);
  if (lse.present()) expect_dtype("lse", lse, DType::fp32);

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
    expect_page_size("k", page_size);
    expect_shape("v", a.v, {{num_pages, "num_pages"}, {page_size, "page_size"}, {heads_kv, "heads_kv"}, {kAny, "head_dim_v"}});
    head_dim_v = a.v.shape[3];
    expect_index_tensor("page_table", a.page_table, {{batch, "batch"}, {kAny, "max_pages"}});
    max_pages = a.page_table.shape[1];
    capacity_k = max_pages * page_size;
  } else if (varlen_k) {
    if (a.k.rank != 3) fail("k", "expected rank 3 (total_k, heads_kv, head_dim) with cu_seqlens_k, got shape " + shape_string(a.k));
    heads_kv = a.k.shape[1];
    expect_shape("k", a.k, {{kAny, "total_k"}, {kAny, "heads_kv"}, {head_dim, "head_dim"}});
    expect_shape("v", a.v, {{a.k.shape[0], "total_k"}, {heads_kv, "heads_kv"}, {kAny, "head_dim_v"}});
    head_dim_v = a.v.shape[2];
    expect_index_tensor("cu_seqlens_k", a.cu_seqlens_k, {{batch + 1, "batch + 1"}});
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
  if (head_dim > kMaxHeadDim || head_dim_v > kMaxHeadDim) {
    const bool q_side = head_dim > kMaxHeadDim;
    fail(q_side ? "q" : "v", std::string(q_side ? "head_dim " : "head_dim_v ") +
                                 std::to_string(q_side ? head_dim : head_dim_v) + " exceeds the " +
                                 std::to_string(kMaxHeadDim) + " any backend takes");
  }
  if (heads_q % heads_kv != 0) {
    fail("q", "heads_q = " + std::to_string(heads_q) + " is not a multiple of heads_kv = " +
                  std::to_string(heads_kv) + " (GQA/MQA share each K/V head among a whole group)");
  }
  check_sinks(a.sinks, a.q, heads_q, meta);

  // Outputs.
  if (o.present()) {
    if (varlen_q) {
      expect_shape("o", o, {{rows_q, "total_q"}, {heads_q, "heads_q"}, {head_dim_v, "head_dim_v"}});
    } else {
      expect_shape("o", o, {{batch, "batch"}, {seqlen_q, "seqlen_q"}, {heads_q, "heads_q"}, {head_dim_v, "head_dim_v"}});
    }
  }
  if (lse.present()) {
    if (varlen_q) {
      expect_shape("lse", lse, {{heads_q, "heads_q"}, {rows_q, "total_q"}});
    } else {
      expect_shape("lse", lse, {{batch, "batch"}, {heads_q, "heads_q"}, {seqlen_q, "seqlen_q"}});
    }
  }

  // Strides and alignment.
  for (const auto& [name, t] : all) {
    if (t->present()) expect_unit_last_stride(name, *t);
  }
  expect_aligned("q", a.q, true, meta);
  expect_aligned("k", a.k, true, meta);
  expect_aligned("v", a.v, true, meta);
  expect_aligned("o", o, true, meta);
  expect_aligned("lse", lse, false, meta);
  for (const auto& [name, t] : all) {
    if (t->present() && t->dtype == DType::int32) expect_aligned(name, *t, false, meta);
  }
  expect_no_internal_overlap("o", o);
  expect_no_internal_overlap("lse", lse);

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
    if (!meta && checks.pointer_attributes && cuda_runtime_available()) {
      for (const auto& [name, t] : all) expect_pointer_on_device(name, *t);
    }
    if (batch > kMaxGridYZ) {
      fail(varlen_q ? "cu_seqlens_q" : "q", std::to_string(batch) + " sequences exceed the " +
                                                std::to_string(kMaxGridYZ) + " the GPU grid holds (its z dimension)");
    }
    if (heads_q > kMaxGridYZ) {
      fail("q", std::to_string(heads_q) + " heads exceed the " + std::to_string(kMaxGridYZ) +
                    " the GPU grid holds (its y dimension)");
    }
  }

  // Scalars.
  const float scale = a.softmax_scale != 0.0f ? a.softmax_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  check_scalars(a.softmax_scale, a.softcap, scale);
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
  check_num_threads(a.num_threads);

  // Memory: no output may share bytes with an input or the other output.
  if (!meta) {
    expect_disjoint({"o", &o}, {{"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"lse", &lse}, {"cu_seqlens_q", &a.cu_seqlens_q},
                                {"cu_seqlens_k", &a.cu_seqlens_k}, {"seqlens_k", &a.seqlens_k},
                                {"page_table", &a.page_table}, {"sinks", &a.sinks}});
    expect_disjoint({"lse", &lse}, {{"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"cu_seqlens_q", &a.cu_seqlens_q},
                                    {"cu_seqlens_k", &a.cu_seqlens_k}, {"seqlens_k", &a.seqlens_k},
                                    {"page_table", &a.page_table}, {"sinks", &a.sinks}});
  }

  // Bounds of the key lengths: the explicit max_seqlen_k may tighten the capacity (it sizes the
  // GPU grid); decode adds the plan's bound.
  if (capacity_k > kMaxIndex) {
    fail(paged ? "page_table" : "k", std::to_string(capacity_k) + " keys per sequence" +
                                         (paged ? " (max_pages * page_size)" : "") + " exceed the " +
                                         std::to_string(kMaxIndex) + " the kernels' int indices allow");
  }
  // A bound the shapes contradict is refused, not ignored: without cu_seqlens (and, for K,
  // without seqlens_k) every sequence has the tensor's full length.
  if (!varlen_q && a.max_seqlen_q > 0 && a.max_seqlen_q < seqlen_q) {
    fail("max_seqlen_q", std::to_string(a.max_seqlen_q) + " is less than q's seqlen_q " + std::to_string(seqlen_q) +
                             " (without cu_seqlens_q every sequence has seqlen_q queries)");
  }
  if (!varlen_k && !a.seqlens_k.present() && a.max_seqlen_k > 0 && a.max_seqlen_k < capacity_k) {
    fail("max_seqlen_k", std::to_string(a.max_seqlen_k) + " is less than k's seqlen_k " + std::to_string(capacity_k) +
                             " (without cu_seqlens_k or seqlens_k every sequence has seqlen_k keys)");
  }
  // The most a sequence can hold: its tensor's length, or with cu_seqlens all the rows. A given
  // bound tightens it (one below a fixed length was refused above); one past it bounds nothing,
  // and is not let size the grid or trip the int index limits below.
  const std::int64_t most_k = varlen_k ? a.k.shape[0] : capacity_k;
  const std::int64_t most_q = varlen_q ? rows_q : seqlen_q;
  std::int64_t max_seqlen_k = a.max_seqlen_k > 0 ? std::min<std::int64_t>(a.max_seqlen_k, most_k) : most_k;
  if (checks.max_seqlen_k_bound >= 0) max_seqlen_k = std::min<std::int64_t>(max_seqlen_k, checks.max_seqlen_k_bound);
  std::int64_t max_seqlen_q = a.max_seqlen_q > 0 ? std::min<std::int64_t>(a.max_seqlen_q, most_q) : most_q;

  // Contents of the index tensors.
  if (varlen_q) {
    if (auto cu = read_index("cu_seqlens_q", a.cu_seqlens_q, batch + 1, checks, a.stream)) {
      const std::int64_t longest = check_cu_seqlens("cu_seqlens_q", *cu, rows_q, "q", a.max_seqlen_q, "max_seqlen_q");
      if (a.max_seqlen_q == 0) max_seqlen_q = longest;
    }
  }
  if (varlen_k) {
    if (auto cu = read_index("cu_seqlens_k", a.cu_seqlens_k, batch + 1, checks, a.stream)) {
      const std::int64_t longest =
          check_cu_seqlens("cu_seqlens_k", *cu, a.k.shape[0], "k", a.max_seqlen_k, "max_seqlen_k");
      if (a.max_seqlen_k == 0) max_seqlen_k = longest;
    }
  }
  std::optional<std::vector<std::int32_t>> seqlens;
  if (a.seqlens_k.present()) {
    seqlens = read_index("seqlens_k", a.seqlens_k, batch, checks, a.stream);
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
    if (auto table = read_index_rows("page_table", a.page_table, checks, a.stream)) {
      const std::int64_t row_stride = a.page_table.shape[1];  // packed
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

  // Derived sizes against the kernels' int indices: packed (query, head) rows of a GQA group,
  // and key positions diag = q + seqlen_k - seqlen_q with a window added.
  if (rows_q > kMaxIndex || (varlen_k && a.k.shape[0] > kMaxIndex)) {
    fail(rows_q > kMaxIndex ? "q" : "k", "more than " + std::to_string(kMaxIndex) +
                                             " rows, beyond the kernels' int row indices");
  }
  const std::int64_t group = heads_q / heads_kv;
  if (max_seqlen_q * group > kMaxIndex) {
    fail("q", "seqlen_q " + std::to_string(max_seqlen_q) + " x group " + std::to_string(group) +
                  " (heads_q / heads_kv) = " + std::to_string(max_seqlen_q * group) + " packed rows exceed the " +
                  std::to_string(kMaxIndex) + " the kernels' int indices allow");
  }
  if (max_seqlen_q + max_seqlen_k > kMaxIndex) {
    fail("k", "seqlen_q " + std::to_string(max_seqlen_q) + " + seqlen_k " + std::to_string(max_seqlen_k) +
                  " exceed the " + std::to_string(kMaxIndex) + " the kernels' int key positions allow");
  }

  // The normalised problem.
  AttentionProblem p;
  p.batch = static_cast<int>(batch);
  p.heads_q = static_cast<int>(heads_q);
  p.heads_kv = static_cast<int>(heads_kv);
  p.head_dim = static_cast<int>(head_dim);
  p.head_dim_v = static_cast<int>(head_dim_v);
  p.max_seqlen_q = static_cast<int>(max_seqlen_q);
  p.max_seqlen_k = static_cast<int>(max_seqlen_k);
  p.seqlen_q = static_cast<int>(seqlen_q);
  // With seqlens_k: the capacity, which the kernels clamp every length to. A pool of no pages
  // holds no key whatever the table's width (the page clamp has no page to clamp to).
  p.seqlen_k = varlen_k || (paged && num_pages == 0) ? 0 : static_cast<int>(capacity_k);
  p.total_q = rows_q;
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
  p.o = o.data;
  if (o.present()) {
    p.o_batch_stride = varlen_q ? 0 : o.stride[0];
    p.o_row_stride = o.stride[qd];
    p.o_head_stride = o.stride[qd + 1];
  }
  if (lse.present()) {
    p.lse = static_cast<float*>(lse.data);
    p.lse_batch_stride = varlen_q ? 0 : lse.stride[0];
    p.lse_head_stride = lse.stride[varlen_q ? 0 : 1];
  }
  p.cu_seqlens_q = static_cast<const std::int32_t*>(a.cu_seqlens_q.data);
  p.cu_seqlens_k = static_cast<const std::int32_t*>(a.cu_seqlens_k.data);
  if (varlen_k) p.total_k = a.k.shape[0];
  p.seqlens_k = static_cast<const std::int32_t*>(a.seqlens_k.data);
  if (paged) {
    p.page_table = static_cast<const std::int32_t*>(a.page_table.data);
    p.page_table_stride = a.page_table.stride[0];
    p.page_size = static_cast<int>(page_size);
    p.num_pages = static_cast<int>(num_pages);
  }
  p.softmax_scale = scale;
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

AttentionChecks checks_for(const ValidationOptions& options, bool check_index_contents) {
  AttentionChecks checks;
  checks.outputs = options.outputs;
  checks.metadata_only = options.scope == CheckScope::metadata;
  checks.device_content_reads = check_index_contents;
  return checks;
}

}  // namespace

void require_usable_gpu(DeviceKind device, int device_index) {
  if (device != DeviceKind::cuda || cuda_runtime_available()) return;
  cuda_query_device(device_index);  // throws a RuntimeError saying why
  throw RuntimeError("no usable CUDA device for CUDA tensors");
}

std::string shape_string(const TensorView& view) {
  std::string s = "(";
  for (int i = 0; i < view.rank && i < kMaxRank; ++i) s += (i ? ", " : "") + std::to_string(view.shape[i]);
  return s + ")";
}

AttentionProblem validate_attention(const AttentionArgs& args, const ValidationOptions& options) {
  return validate_attention_impl(args, checks_for(options, args.check_index_contents));
}

void validate_decode_problem(const DecodeProblem& p) {
  auto range = [](const char* arg, std::int64_t value, std::int64_t lo, std::int64_t hi, const char* why) {
    if (value < lo || value > hi) {
      fail(arg, "expected " + std::to_string(lo) + (hi == std::numeric_limits<int>::max() ? std::string(" or more") : ".." + std::to_string(hi)) +
                    " (" + why + "), got " + std::to_string(value));
    }
  };
  constexpr int kNoLimit = std::numeric_limits<int>::max();
  const bool gpu = p.device == DeviceKind::cuda;
  range("problem.batch", p.batch, 0, gpu ? kMaxGridYZ : kNoLimit, gpu ? "sequences, at most the GPU grid's z dimension; 0 is allowed and does nothing" : "sequences; 0 is allowed and does nothing");
  range("problem.q_per_seq", p.q_per_seq, 1, kMaxQueriesPerSequence, "query tokens per sequence");
  range("problem.heads_q", p.heads_q, 1, kNoLimit, "query heads");
  range("problem.heads_kv", p.heads_kv, 1, kNoLimit, "key/value heads");
  if (p.heads_q % p.heads_kv != 0) {
    fail("problem.heads_q", std::to_string(p.heads_q) + " is not a multiple of heads_kv = " + std::to_string(p.heads_kv));
  }
  if (gpu && static_cast<std::int64_t>(p.heads_q) * p.q_per_seq > kMaxGridYZ) {
    fail("problem.heads_q", std::to_string(p.heads_q) + " heads x " + std::to_string(p.q_per_seq) +
                                " queries per sequence exceed the " + std::to_string(kMaxGridYZ) +
                                " packed rows the GPU decode grid's y dimension holds");
  }
  range("problem.head_dim", p.head_dim, 1, kMaxHeadDim, "query/key head dimension");
  range("problem.head_dim_v", p.head_dim_v, 1, kMaxHeadDim, "value head dimension");
  range("problem.max_seqlen_k", p.max_seqlen_k, 0, kMaxIndex, "bound on any sequence's key count");
  if (p.page_size != 0) range("problem.page_size", p.page_size, 1, kMaxPageSize, "tokens per page; 0 = contiguous cache");
  if (p.dtype != DType::bf16 && p.dtype != DType::fp16 && p.dtype != DType::fp32) {
    fail("problem.dtype", std::string("expected bf16, fp16 or fp32, got ") + dtype_name(p.dtype), true);
  }
  if (gpu && p.dtype == DType::fp32) {
    fail("problem.dtype", "fp32 is supported on the CPU only; the GPU decode takes bf16 or fp16", true);
  }
  if (p.device != DeviceKind::cpu && p.device != DeviceKind::cuda) fail("problem.device", "unknown device kind");
}

AttentionProblem validate_decode(const DecodePlan& plan, const DecodeArgs& d, const ValidationOptions& options) {
  const DecodeProblem& pr = plan.problem;
  const bool meta = options.scope == CheckScope::metadata;
  validate_decode_problem(pr);
  require_present("q", d.q);
  require_present("k", d.k);
  require_present("v", d.v);
  require_present("seqlens_k", d.seqlens_k);
  check_pointer("q", d.q, meta);
  check_pointer("k", d.k, meta);
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
  if (!meta && options.outputs && plan.workspace_bytes > 0) {  // the workspace is an output too
    if (d.workspace == nullptr) fail("workspace", "null, but the plan needs " + std::to_string(plan.workspace_bytes) + " bytes");
    if (reinterpret_cast<std::uintptr_t>(d.workspace) % kWorkspaceAlignment != 0) {
      fail("workspace", "must be " + std::to_string(kWorkspaceAlignment) + "-byte aligned");
    }
  }
  // The paged GPU decode addresses rows with 32-bit byte strides (one wide multiply-add each).
  if (pr.device == DeviceKind::cuda && pr.page_size > 0) {
    const Named kv[] = {{"k", &d.k}, {"v", &d.v}};
    for (const auto& [name, t] : kv) {
      for (int i = 0; i < 2; ++i) {
        const std::int64_t bytes = t->stride[i] * static_cast<std::int64_t>(dtype_size(pr.dtype));
        if (bytes > 0xffffffffLL) {
          fail(name, "the paged GPU decode takes page and row strides below 4 GiB, got " + std::to_string(bytes) +
                         " bytes (dimension " + std::to_string(i) + ")");
        }
      }
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
  a.num_threads = d.num_threads;
  a.stream = d.stream;
  AttentionChecks checks = checks_for(options, d.check_index_contents);
  checks.prefill_instantiation = false;  // the decode kernels have their own list (cuda_plan_decode)
  checks.pointer_attributes = false;
  checks.max_seqlen_k_bound = pr.max_seqlen_k;
  AttentionProblem p = validate_attention_impl(a, checks);
  p.max_seqlen_k = pr.max_seqlen_k;  // the launch shape comes from the plan

  // The kernels write partial results into the workspace: it may overlap nothing else.
  if (!meta && plan.workspace_bytes > 0 && d.workspace != nullptr) {
    TensorView ws = make_view(d.workspace, DType::int32, {static_cast<std::int64_t>((plan.workspace_bytes + 3) / 4)},
                              pr.device, pr.device_index);
    const TensorView o = options.outputs ? d.o : TensorView{};
    const TensorView lse = options.outputs ? d.lse : TensorView{};
    expect_disjoint({"workspace", &ws}, {{"q", &d.q}, {"k", &d.k}, {"v", &d.v}, {"o", &o}, {"lse", &lse},
                                         {"seqlens_k", &d.seqlens_k}, {"page_table", &d.page_table},
                                         {"sinks", &d.sinks}});
  }
  return p;
}

MergeProblem validate_merge(const MergeStatesArgs& a, const ValidationOptions& options) {
  const bool meta = options.scope == CheckScope::metadata;
  const TensorView o = options.outputs ? a.o : TensorView{};
  const TensorView lse = options.outputs ? a.lse : TensorView{};
  require_present("o_parts", a.o_parts);
  require_present("lse_parts", a.lse_parts);
  if (options.outputs) require_present("o", o);
  const Named all[] = {{"o_parts", &a.o_parts}, {"lse_parts", &a.lse_parts}, {"o", &o}, {"lse", &lse}};
  for (const auto& [name, t] : all) check_pointer(name, *t, meta);
  expect_float_dtype("o_parts", a.o_parts);
  if (o.present()) expect_same_dtype("o", o, "o_parts", a.o_parts.dtype, "o_parts and o");
  expect_dtype("lse_parts", a.lse_parts, DType::fp32);
  if (lse.present()) expect_dtype("lse", lse, DType::fp32);
  for (const auto& [name, t] : all) expect_same_device(name, *t, a.o_parts, "o_parts");

  if (a.o_parts.rank != 4) fail("o_parts", "expected rank 4 (num_parts, tokens, heads, head_dim_v), got shape " + shape_string(a.o_parts));
  const std::int64_t n = a.o_parts.shape[0], t = a.o_parts.shape[1], h = a.o_parts.shape[2], dv = a.o_parts.shape[3];
  if (n < 1) fail("o_parts", "expected at least one part, got shape " + shape_string(a.o_parts));
  expect_shape("lse_parts", a.lse_parts, {{n, "num_parts"}, {t, "tokens"}, {h, "heads"}});
  if (o.present()) expect_shape("o", o, {{t, "tokens"}, {h, "heads"}, {dv, "head_dim_v"}});
  if (lse.present()) expect_shape("lse", lse, {{t, "tokens"}, {h, "heads"}});
  // O rows are read and written as vectors; the LSE views may have any strides, so that
  // attention's (N, H, T) LSE passes as its transposed view without a copy.
  expect_unit_last_stride("o_parts", a.o_parts);
  if (o.present()) expect_unit_last_stride("o", o);
  expect_aligned("o_parts", a.o_parts, true, meta);
  expect_aligned("o", o, true, meta);
  expect_aligned("lse_parts", a.lse_parts, false, meta);
  expect_aligned("lse", lse, false, meta);
  expect_no_internal_overlap("o", o);
  expect_no_internal_overlap("lse", lse);
  if (a.o_parts.device == DeviceKind::cuda) {
    if (!meta && cuda_runtime_available()) {
      for (const auto& [name, tv] : all) expect_pointer_on_device(name, *tv);
    }
    if (t * h > kMaxCombineRows) {
      fail("o_parts", std::to_string(t) + " tokens x " + std::to_string(h) + " heads exceed the " +
                          std::to_string(kMaxCombineRows) + " rows the GPU combine's grid holds");
    }
  }
  if (!meta) {
    expect_disjoint({"o", &o}, {{"o_parts", &a.o_parts}, {"lse_parts", &a.lse_parts}, {"lse", &lse}});
    expect_disjoint({"lse", &lse}, {{"o_parts", &a.o_parts}, {"lse_parts", &a.lse_parts}});
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
  p.o = o.data;
  if (o.present()) {
    p.o_token_stride = o.stride[0];
    p.o_head_stride = o.stride[1];
  }
  if (lse.present()) {
    p.lse = static_cast<float*>(lse.data);
    p.lse_token_stride = lse.stride[0];
    p.lse_head_stride = lse.stride[1];
  }
  p.stream = a.stream;
  return p;
}

AppendProblem validate_append(const AppendKvArgs& a, CheckScope scope) {
  const bool meta = scope == CheckScope::metadata;
  const bool paged = a.page_table.present();
  const Named rows_of[] = {{"k_cache", &a.k_cache}, {"v_cache", &a.v_cache}, {"k", &a.k}, {"v", &a.v}};
  const Named all[] = {rows_of[0], rows_of[1], rows_of[2], rows_of[3], {"cache_seqlens", &a.cache_seqlens},
                       {"cache_batch_idx", &a.cache_batch_idx}, {"page_table", &a.page_table}};
  for (const auto& [name, t] : rows_of) require_present(name, *t);
  require_present("cache_seqlens", a.cache_seqlens);
  for (const auto& [name, t] : all) check_pointer(name, *t, meta);
  expect_float_dtype("k_cache", a.k_cache);
  const char* family = "k_cache, v_cache, k and v";
  expect_same_dtype("v_cache", a.v_cache, "k_cache", a.k_cache.dtype, family);
  expect_same_dtype("k", a.k, "k_cache", a.k_cache.dtype, family);
  expect_same_dtype("v", a.v, "k_cache", a.k_cache.dtype, family);
  for (const auto& [name, t] : all) expect_same_device(name, *t, a.k_cache, "k_cache");
  if (paged && a.cache_batch_idx.present()) {
    fail("cache_batch_idx", "cannot be combined with page_table (index the page table instead)");
  }

  const char* cache_layout =
      paged ? "(num_pages, page_size, heads_kv, head_dim)" : "(batch_cache, seqlen_cache, heads_kv, head_dim)";
  if (a.k_cache.rank != 4) {
    fail("k_cache", std::string("expected rank 4 ") + cache_layout + ", got shape " + shape_string(a.k_cache));
  }
  if (a.k.rank != 4) fail("k", "expected rank 4 (batch, seqlen_new, heads_kv, head_dim), got shape " + shape_string(a.k));
  const std::int64_t rows = a.k_cache.shape[0], entries = a.k_cache.shape[1], heads = a.k_cache.shape[2],
                     d = a.k_cache.shape[3];
  const std::int64_t batch = a.k.shape[0], seqlen_new = a.k.shape[1];
  expect_shape("v_cache", a.v_cache,
               {{rows, paged ? "num_pages" : "batch_cache"}, {entries, paged ? "page_size" : "seqlen_cache"},
                {heads, "heads_kv"}, {kAny, "head_dim_v"}});
  const std::int64_t dv = a.v_cache.shape[3];
  // attention and decode read pages of up to kMaxPageSize rows: a pool the append could fill but
  // neither could read is refused here too.
  if (paged) expect_page_size("k_cache", entries);
  expect_shape("k", a.k, {{batch, "batch"}, {seqlen_new, "seqlen_new"}, {heads, "heads_kv"}, {d, "head_dim"}});
  expect_shape("v", a.v, {{batch, "batch"}, {seqlen_new, "seqlen_new"}, {heads, "heads_kv"}, {dv, "head_dim_v"}});
  expect_index_tensor("cache_seqlens", a.cache_seqlens, {{batch, "batch"}});
  if (a.cache_batch_idx.present()) expect_index_tensor("cache_batch_idx", a.cache_batch_idx, {{batch, "batch"}});
  if (!paged && !a.cache_batch_idx.present() && batch > rows) {
    fail("k", "batch " + std::to_string(batch) + " exceeds k_cache's " + std::to_string(rows) +
                  " sequences (sequence b is appended to row b; cache_batch_idx picks other rows)");
  }
  std::int64_t max_pages = 0;
  if (paged) {
    expect_index_tensor("page_table", a.page_table, {{batch, "batch"}, {kAny, "max_pages"}});
    max_pages = a.page_table.shape[1];
  }
  // The copies move elements one at a time: element alignment is all they need.
  for (const auto& [name, t] : all) expect_aligned(name, *t, /*vector_access=*/false, meta);
  for (const auto& [name, t] : rows_of) expect_unit_last_stride(name, *t);
  expect_no_internal_overlap("k_cache", a.k_cache);
  expect_no_internal_overlap("v_cache", a.v_cache);
  if (meta) return {};  // what follows compares pointers and reads index contents

  // The caches may take turns in one buffer (interleaved_apart); nothing else may overlap them.
  if (!interleaved_apart(a.k_cache, a.v_cache)) expect_disjoint({"k_cache", &a.k_cache}, {{"v_cache", &a.v_cache}});
  expect_disjoint({"k_cache", &a.k_cache}, {{"k", &a.k}, {"v", &a.v}, {"cache_seqlens", &a.cache_seqlens},
                                           {"cache_batch_idx", &a.cache_batch_idx}, {"page_table", &a.page_table}});
  expect_disjoint({"v_cache", &a.v_cache}, {{"k", &a.k}, {"v", &a.v}, {"cache_seqlens", &a.cache_seqlens},
                                           {"cache_batch_idx", &a.cache_batch_idx}, {"page_table", &a.page_table}});
  const bool cuda = a.k_cache.device == DeviceKind::cuda;
  if (cuda && cuda_runtime_available()) {
    for (const auto& [name, t] : all) expect_pointer_on_device(name, *t);
  }
  const std::int64_t capacity = paged ? max_pages * entries : entries;

  // Index contents: host tensors always, CUDA ones when asked (outside graph capture).
  AttentionChecks checks;
  checks.device_content_reads = a.check_index_contents;
  if (auto lens = read_index("cache_seqlens", a.cache_seqlens, batch, checks, a.stream)) {
    for (std::int64_t b = 0; b < batch; ++b) {
      const std::int64_t n = (*lens)[b];
      if (n < 0 || n + seqlen_new > capacity) {
        fail(indexed("cache_seqlens", b), "appending " + std::to_string(seqlen_new) + " tokens at " +
                                              std::to_string(n) + " leaves the cache of " + std::to_string(capacity) +
                                              " tokens per sequence");
      }
    }
    if (paged && seqlen_new > 0) {
      if (auto table = read_index_rows("page_table", a.page_table, checks, a.stream)) {
        for (std::int64_t b = 0; b < batch; ++b) {
          for (std::int64_t j = (*lens)[b] / entries; j <= ((*lens)[b] + seqlen_new - 1) / entries; ++j) {
            const std::int32_t page = (*table)[b * max_pages + j];
            if (page < 0 || page >= rows) {
              fail("page_table[" + std::to_string(b) + "][" + std::to_string(j) + "]",
                   "page index " + std::to_string(page) + " where the append writes is outside the pool of " +
                       std::to_string(rows) + " pages");
            }
          }
        }
      }
    }
  }
  if (a.cache_batch_idx.present()) {
    if (auto idx = read_index("cache_batch_idx", a.cache_batch_idx, batch, checks, a.stream)) {
      for (std::int64_t b = 0; b < batch; ++b) {
        if ((*idx)[b] < 0 || (*idx)[b] >= rows) {
          fail(indexed("cache_batch_idx", b), "row " + std::to_string((*idx)[b]) + " is outside the cache's " +
                                                  std::to_string(rows) + " sequences");
        }
      }
    }
  }

  AppendProblem p;
  p.batch = static_cast<int>(batch);
  p.seqlen_new = static_cast<int>(seqlen_new);
  p.heads_kv = static_cast<int>(heads);
  p.head_dim = static_cast<int>(d);
  p.head_dim_v = static_cast<int>(dv);
  p.cache_rows = static_cast<int>(rows);
  p.rows_per_entry = static_cast<int>(entries);
  p.max_pages = static_cast<int>(max_pages);
  p.dtype = a.k_cache.dtype;
  p.device = a.k_cache.device;
  p.device_index = a.k_cache.device_index;
  p.k_cache = a.k_cache.data;
  p.v_cache = a.v_cache.data;
  p.k = a.k.data;
  p.v = a.v.data;
  for (int i = 0; i < 3; ++i) {
    p.kc_stride[i] = a.k_cache.stride[i];
    p.vc_stride[i] = a.v_cache.stride[i];
    p.k_stride[i] = a.k.stride[i];
    p.v_stride[i] = a.v.stride[i];
  }
  p.cache_seqlens = static_cast<const std::int32_t*>(a.cache_seqlens.data);
  p.cache_batch_idx = static_cast<const std::int32_t*>(a.cache_batch_idx.data);
  p.page_table = static_cast<const std::int32_t*>(a.page_table.data);
  if (paged) p.page_table_stride = a.page_table.stride[0];
  p.stream = a.stream;
  return p;
}

}  // namespace flashbuf::detail
