// flashbuf public API: tensor views, argument structs, and the entry points (prefill
// `attention`, token-generation `decode` with its `plan_decode` step, `merge_states`, and
// `append_kv`, the KV-cache append). Host C++ only; no CUDA headers. Everything is validated
// before anything launches or is written: bad input throws flashbuf::ArgumentError naming the
// argument.
//
// Layouts (the FlashAttention convention, strides in elements, last dim contiguous):
//   batch   : q (B, Sq, Hq, D)    k (B, Sk, Hkv, D)    v (B, Sk, Hkv, Dv)   o (B, Sq, Hq, Dv)
//             lse (B, Hq, Sq) fp32
//   varlen  : q (Tq, Hq, D)       k (Tk, Hkv, D)       v (Tk, Hkv, Dv)      o (Tq, Hq, Dv)
//             lse (Hq, Tq) fp32; cu_seqlens_q / cu_seqlens_k int32 (B+1)
//   paged   : k (P, page, Hkv, D)  v (P, page, Hkv, Dv); page_table int32 (B, max_pages);
//             seqlens_k int32 (B) gives each sequence's key count
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "flashbuf/version.hpp"  // FLASHBUF_VERSION_MAJOR/MINOR/PATCH, FLASHBUF_VERSION_STRING

namespace flashbuf {

enum class DType : int { bf16 = 0, fp16 = 1, fp32 = 2, int32 = 3 };
enum class DeviceKind : int { cpu = 0, cuda = 1 };

const char* dtype_name(DType dtype);
std::size_t dtype_size(DType dtype);

inline constexpr int kMaxRank = 4;

// A non-owning strided view. Rank 0 (data == nullptr) means "absent" for optional tensors.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::bf16;
  int rank = 0;
  std::int64_t shape[kMaxRank] = {0, 0, 0, 0};
  std::int64_t stride[kMaxRank] = {0, 0, 0, 0};
  DeviceKind device = DeviceKind::cpu;
  int device_index = 0;

  bool present() const { return rank > 0; }
  std::int64_t numel() const;
  bool is_contiguous() const;
};

// Contiguous (row-major) view over `data` with the given shape.
TensorView make_view(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                     DeviceKind device = DeviceKind::cpu, int device_index = 0);

// Thrown for every invalid argument, before any work starts. `argument()` names the argument
// ("q", "cu_seqlens_k", ...). `is_type_error()` marks dtype problems (Python: TypeError).
class ArgumentError : public std::invalid_argument {
 public:
  ArgumentError(std::string argument, const std::string& what, bool type_error = false)
      : std::invalid_argument(argument + ": " + what),
        argument_(std::move(argument)),
        type_error_(type_error) {}
  const std::string& argument() const { return argument_; }
  bool is_type_error() const { return type_error_; }

 private:
  std::string argument_;
  bool type_error_;
};

// Runtime failures after validation (a CUDA error, no device, ...).
class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Which keys a query row sees. Positions are bottom-right aligned: query i of a sequence with
// Sq queries and Sk keys sits at key position i + (Sk - Sq) (FlashAttention >= 2.1).
// window_left/right < 0 mean unbounded on that side. causal == window (-1, 0).
enum class MaskKind : int { none = 0, causal = 1, sliding_window = 2 };
struct Mask {
  MaskKind kind = MaskKind::none;
  int window_left = -1;
  int window_right = -1;

  static Mask none() { return {}; }
  static Mask causal() { return {MaskKind::causal, -1, 0}; }
  static Mask window(int left, int right) { return {MaskKind::sliding_window, left, right}; }
};

enum class Backend : int { automatic = 0, cpu = 1, sm80 = 2, sm90 = 3 };
const char* backend_name(Backend backend);

// Prefill (context encoding) and general attention.
struct AttentionArgs {
  TensorView q, k, v;          // see the layouts above
  TensorView o;                // written
  TensorView lse;              // optional, written, natural log; -inf for rows with no key
  TensorView cu_seqlens_q;     // optional int32 (B+1): varlen queries
  TensorView cu_seqlens_k;     // optional int32 (B+1): varlen keys (not with paged)
  TensorView seqlens_k;        // optional int32 (B): keys used per sequence (batch or paged)
  TensorView page_table;       // optional int32 (B, max_pages): paged K/V
  // Upper bounds on the sequence lengths with cu_seqlens_* (they size the GPU grid). 0: the
  // library derives one: the longest sequence when the offsets are read (host memory, or
  // check_index_contents), else the rows of q / k, which costs empty blocks but no read.
  int max_seqlen_q = 0;
  int max_seqlen_k = 0;
  // Scalars (docs/errors.md): softmax_scale > 0 (0 means 1/sqrt(D)); softcap 0 (off) or in
  // [FLT_MIN, FLT_MAX / log2 e] with softmax_scale / softcap finite. A score whose scaled value
  // overflows fp32 gives its row NaN.
  float softmax_scale = 0.0f;
  Mask mask{};
  float softcap = 0.0f;        // > 0: scores become softcap * tanh(scores / softcap)
  TensorView sinks;            // optional fp32 (Hq): a learned sink logit per query head, in the
                               // units of the scaled, soft-capped scores (see apply_sink in core)
  void* stream = nullptr;      // cudaStream_t for CUDA tensors
  Backend backend = Backend::automatic;
  int num_threads = 0;         // CPU backend: worker threads; 0 = the library's default
  // Index tensors (cu_seqlens_*, seqlens_k, page_table) in host memory are always checked
  // entry by entry. CUDA ones are not read unless this is set: checking them copies them to
  // the host and synchronises the stream (skipped while the stream captures a CUDA graph).
  // Unchecked, a bad entry gives wrong rows, never an access outside the tensors given.
  bool check_index_contents = false;
};

// Runs attention; returns the backend that ran.
Backend attention(const AttentionArgs& args);

// Token generation: few query tokens per sequence over a (paged) KV cache, split across
// blocks, with partial results merged in a workspace. plan once per batch shape, run many.
struct DecodeProblem {
  int batch = 0;
  int q_per_seq = 1;      // 1..16 (speculative decoding)
  int heads_q = 0, heads_kv = 0;
  int head_dim = 0, head_dim_v = 0;
  int max_seqlen_k = 0;   // upper bound on any sequence's key count
  int page_size = 0;      // 0 = contiguous cache
  DType dtype = DType::bf16;
  DeviceKind device = DeviceKind::cuda;
  int device_index = 0;
};

struct DecodePlan {
  DecodeProblem problem{};
  int num_splits = 1;           // KV splits per (sequence, kv head)
  int keys_per_split = 0;       // multiple of the kernel's key tile
  std::size_t workspace_bytes = 0;  // partial O (fp32) and LSE of every split; 0 if unsplit or merged in thread-block clusters (sm_90)
};

DecodePlan plan_decode(const DecodeProblem& problem);

struct DecodeArgs {
  TensorView q;            // (B, q_per_seq, Hq, D)
  TensorView k, v;         // (B, Smax, Hkv, D) contiguous, or paged (P, page, Hkv, D)
  TensorView seqlens_k;    // int32 (B), required; may change between graph replays
  TensorView page_table;   // int32 (B, max_pages) when paged
  TensorView o;            // (B, q_per_seq, Hq, Dv)
  TensorView lse;          // optional fp32 (B, Hq, q_per_seq)
  float softmax_scale = 0.0f;
  Mask mask{};             // causal applies among the q_per_seq tokens (bottom-right)
  float softcap = 0.0f;
  TensorView sinks;        // optional fp32 (Hq), as in AttentionArgs; counted once per row, not per split
  void* workspace = nullptr;  // plan.workspace_bytes, 256-byte aligned, same device
  void* stream = nullptr;
  int num_threads = 0;     // CPU backend: worker threads; 0 = the library's default
  bool check_index_contents = false;  // as in AttentionArgs
};

Backend decode(const DecodePlan& plan, const DecodeArgs& args);

// Combine partial attention results: o_parts (N, T, H, Dv) with lse_parts fp32 (N, T, H)
// into o (T, H, Dv) and optionally lse (T, H). Per (token, head) row:
//   a part with lse = -inf contributes nothing (its o is not read); all -inf: o = 0, lse = -inf;
//   any part with lse = NaN: o = NaN, lse = NaN;
//   parts with lse = +inf (an overflowed denominator) take all the weight, shared equally:
//   o = their mean, lse = +inf. A NaN in the o of a part with weight gives NaN o.
// lse_parts and lse may have any strides (o_parts and o need a contiguous last dimension), so
// the (H, T) LSE that varlen attention writes is merged through its transposed view.
struct MergeStatesArgs {
  TensorView o_parts, lse_parts;
  TensorView o, lse;
  void* stream = nullptr;
};

Backend merge_states(const MergeStatesArgs& args);

// Append new keys and values to a KV cache in place (what FlashAttention's
// flash_attn_with_kvcache does before it attends): token i of sequence b is written at position
// cache_seqlens[b] + i of its cache row, cache_batch_idx[b] (b without it), or, with
// page_table, of its pages: page page_table[b][pos / page], row pos % page. Host index tensors
// are checked entry by entry (an ArgumentError names the first bad one, "cache_seqlens[1]",
// before anything is written); CUDA ones only with check_index_contents (a copy and a stream
// synchronisation). Unchecked, a token whose position or page lies outside the cache is not
// written, the others are: one launch, no synchronisation, capturable in a CUDA graph. The
// caches may take turns in one buffer (K and V halves of one pool) but not overlap otherwise;
// two tokens whose entries name one place (repeated cache_batch_idx rows, a page two sequences
// share) leave that place unspecified on CUDA, as in FlashAttention.
struct AppendKvArgs {
  TensorView k_cache, v_cache;  // (Bc, S, Hkv, D), (Bc, S, Hkv, Dv); or paged (P, page, Hkv, D|Dv)
  TensorView k, v;              // (B, S_new, Hkv, D), (B, S_new, Hkv, Dv), the caches' dtype
  TensorView cache_seqlens;     // int32 (B): tokens each sequence has before the append
  TensorView cache_batch_idx;   // optional int32 (B), contiguous caches only
  TensorView page_table;        // optional int32 (B, max_pages): a paged cache
  void* stream = nullptr;
  bool check_index_contents = false;  // as in AttentionArgs
};

Backend append_kv(const AppendKvArgs& args);

// Checking without running. Each function makes every check its entry point makes on the
// inputs (o and lse are not looked at) and returns the shapes o and lse must have; it throws
// the ArgumentError the entry point would. Bindings call it before allocating the outputs.
// CheckScope::metadata looks at shapes, strides, dtypes, devices and scalars only: no data
// pointer is read, compared or required (torch.compile's fake tensors carry none).
enum class CheckScope : int { full = 0, metadata = 1 };
struct OutputShapes {
  int o_rank = 0;
  std::int64_t o[kMaxRank] = {0, 0, 0, 0};
  int lse_rank = 0;
  std::int64_t lse[kMaxRank] = {0, 0, 0, 0};
};
OutputShapes attention_output_shapes(const AttentionArgs& args, CheckScope scope = CheckScope::full);
OutputShapes decode_output_shapes(const DecodePlan& plan, const DecodeArgs& args,
                                  CheckScope scope = CheckScope::full);
OutputShapes merge_output_shapes(const MergeStatesArgs& args, CheckScope scope = CheckScope::full);
// append_kv has no outputs to size: this makes its checks (torch.compile's fake rule calls it).
void check_append_kv(const AppendKvArgs& args, CheckScope scope = CheckScope::full);

// Device discovery (returns false on machines without a usable CUDA GPU).
bool cuda_available();
struct DeviceInfo {
  std::string name;
  int major = 0, minor = 0;
  int sm_count = 0;
};
DeviceInfo cuda_device_info(int device_index = 0);

// What this build instantiated (head dims, dtypes, architectures).
std::string build_info();

}  // namespace flashbuf
