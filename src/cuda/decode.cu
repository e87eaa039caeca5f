// The CUDA decode backend: cuda_plan_decode (host, once per batch shape: kernel shape,
// number of splits, workspace size) and cuda_decode (no synchronisation, no allocation, a
// launch shape from the plan only: graph-capturable). The kernels are compiled in the units
// cmake/instantiations.cmake generates from FLASHBUF_DECODE_INSTANTIATIONS (one per dtype_D,
// listed in generated/decode_instantiation_list.hpp); several splits merge in the kernel's
// thread-block clusters, or through the workspace and the merge_states kernel
// (kernels/combine.cuh) — decode_config.cuh's SplitMerge.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

#include "api/backends.hpp"
#include "cuda/check.cuh"
#include "cuda/combine_launch.cuh"
#include "cuda/decode_launch.cuh"
#include "cuda/device_attribute.cuh"
#include "flashbuf/kernels/decode_config.cuh"
#include "flashbuf/tuning.hpp"
#include "decode_instantiation_list.hpp"

namespace flashbuf::kernels::decode {
FLASHBUF_FOR_EACH_DECODE_INSTANTIATION(FLASHBUF_DECODE_EXTERN)
}  // namespace flashbuf::kernels::decode

namespace flashbuf::detail {

bool decode_instantiated(DType dtype, int head_dim) {
#define FLASHBUF_DECODE_MATCH(DT, D) \
  if (dtype == DType::DT && head_dim == D) return true;
  FLASHBUF_FOR_EACH_DECODE_INSTANTIATION(FLASHBUF_DECODE_MATCH)
#undef FLASHBUF_DECODE_MATCH
  return false;
}

namespace {

namespace dk = ::flashbuf::kernels::decode;
namespace ck = ::flashbuf::kernels::combine;

// Switches to `device` for the scope of a call and back.
class DecodeDeviceScope {
 public:
  explicit DecodeDeviceScope(int device) {
    FLASHBUF_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) FLASHBUF_CUDA_CHECK(cudaSetDevice(device));
    switched_ = previous_ != device;
  }
  ~DecodeDeviceScope() {
    if (switched_) cudaSetDevice(previous_);
  }
  DecodeDeviceScope(const DecodeDeviceScope&) = delete;
  DecodeDeviceScope& operator=(const DecodeDeviceScope&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

// The kernel shape of a problem: 16-row tiles per block and the number of row chunks
// (groups * tokens above 128 rows are cut into chunks of 128; each chunk re-reads K/V).
struct DecodeShape {
  int group = 1;
  int rows = 1;
  int mtiles = 1;
  int row_chunks = 1;
  int block_n = 64;
};

DecodeShape decode_shape(const DecodeProblem& pr) {
  DecodeShape s;
  s.group = pr.heads_q / pr.heads_kv;
  s.rows = pr.q_per_seq * s.group;
  s.mtiles = dk::mtiles_for_rows(s.rows);
  s.row_chunks = ceil_div(s.rows, 16 * s.mtiles);
  s.block_n = dk::block_n_for(pr.head_dim, s.rows);
  return s;
}

void check_supported(const DecodeProblem& pr) {
  if (pr.dtype != DType::bf16 && pr.dtype != DType::fp16) {
    throw ArgumentError("problem.dtype", std::string("the GPU decode takes bf16 or fp16, got ") + dtype_name(pr.dtype), true);
  }
  if (pr.head_dim != 64 && pr.head_dim != 128 && pr.head_dim != 256) {
    throw ArgumentError("problem.head_dim", "the GPU decode is built for head dims 64, 128 and 256, got " +
                                                std::to_string(pr.head_dim));
  }
  if (!decode_instantiated(pr.dtype, pr.head_dim)) {
    throw ArgumentError("problem.head_dim", std::string("the GPU decode for ") + dtype_name(pr.dtype) + " head_dim " +
                                                std::to_string(pr.head_dim) +
                                                " is not compiled into this build (FLASHBUF_DECODE_INSTANTIATIONS: " +
                                                FLASHBUF_DECODE_INSTANTIATION_NAMES + ")");
  }
  if (pr.head_dim_v != pr.head_dim) {
    throw ArgumentError("problem.head_dim_v", "the GPU decode needs head_dim_v == head_dim (" +
                                                  std::to_string(pr.head_dim) + "), got " +
                                                  std::to_string(pr.head_dim_v));
  }
  if (pr.heads_kv < 1 || pr.heads_q % pr.heads_kv != 0) {
    throw ArgumentError("problem.heads_q", "must be a multiple of heads_kv");
  }
  if (pr.q_per_seq < 1 || pr.q_per_seq > 16) {
    throw ArgumentError("problem.q_per_seq", "expected 1..16, got " + std::to_string(pr.q_per_seq));
  }
  // The grid (num_splits, heads_kv x row chunks, batch): y and z are limited to 65535.
  const std::int64_t grid_y = static_cast<std::int64_t>(pr.heads_kv) * decode_shape(pr).row_chunks;
  if (grid_y > 65535 || pr.batch > 65535) {
    throw ArgumentError("problem.batch", "batch (" + std::to_string(pr.batch) + ") and heads_kv x row chunks (" +
                                             std::to_string(grid_y) + ") must each be <= 65535 on the GPU decode");
  }
}

dk::DecodeKernelInfo kernel_info(const DecodeProblem& pr, int mtiles) {
#define FLASHBUF_DECODE_INFO(DT, D) \
  if (pr.dtype == DType::DT && pr.head_dim == D) return dk::decode_kernel_info<FLASHBUF_DECODE_ELEM(DT), D>(mtiles, pr.device_index);
  FLASHBUF_FOR_EACH_DECODE_INSTANTIATION(FLASHBUF_DECODE_INFO)
#undef FLASHBUF_DECODE_INFO
  dk::DecodeKernelInfo none;
  none.error = cudaErrorInvalidDeviceFunction;
  none.failed_call = "kernel_info (no instantiation: check_supported should have rejected it)";
  return none;
}

cudaError_t launch_kernel(const DecodeProblem& pr, int mtiles, const dk::DecodeParams& params, dim3 grid,
                          cudaStream_t stream) {
#define FLASHBUF_DECODE_LAUNCH(DT, D)                     \
  if (pr.dtype == DType::DT && pr.head_dim == D)          \
    return dk::launch_decode<FLASHBUF_DECODE_ELEM(DT), D>(mtiles, pr.device_index, params, grid, stream);
  FLASHBUF_FOR_EACH_DECODE_INSTANTIATION(FLASHBUF_DECODE_LAUNCH)
#undef FLASHBUF_DECODE_LAUNCH
  return cudaErrorInvalidDeviceFunction;
}

// Why a kernel cannot run on the plan's device, in words.
[[noreturn]] void throw_cannot_run(const DecodeProblem& pr, int mtiles, const dk::DecodeKernelInfo& info) {
  std::string why;
  if (info.error != cudaSuccess) {
    why = std::string(info.failed_call != nullptr ? info.failed_call : "a CUDA runtime call") + " failed: " +
          cudaGetErrorName(info.error) + " (" + cudaGetErrorString(info.error) + ")";
    if (info.error == cudaErrorNoKernelImageForDevice || info.error == cudaErrorInvalidDeviceFunction) {
      why += "; this build's CUDA architectures are " FLASHBUF_BUILD_ARCHS;
    }
  } else if (info.smem_optin_max > 0 && info.smem_bytes > info.smem_optin_max) {
    why = "it needs " + std::to_string(info.smem_bytes) + " bytes of shared memory per block and the device allows " +
          std::to_string(info.smem_optin_max);
  } else {
    why = "the occupancy query reports 0 resident blocks per SM";
  }
  throw RuntimeError("flashbuf decode: the " + std::string(dtype_name(pr.dtype)) + " kernel for head_dim " +
                     std::to_string(pr.head_dim) + " with " + std::to_string(16 * mtiles) + "-row tiles (" +
                     std::to_string(info.smem_bytes) + " bytes of shared memory, " + std::to_string(info.threads) +
                     " threads) cannot run on device " + std::to_string(pr.device_index) + ": " + why);
}

// The most splits a plan may carry (the heuristic stays <= 128; forced or hand-edited plans
// are bounded so split * keys_per_split cannot overflow and the grid stays modest).
constexpr int kMaxDecodeSplits = 1024;

// Tuning overrides (flashbuf/tuning.hpp; tests and benchmarks set them), read at plan time,
// except the ring, read at launch. Unset: the heuristic.
// The tests edit a plan's num_splits and workspace_bytes with decode_config.cuh's arithmetic.
int forced_splits() {
  const int n = tuning_overrides().decode_splits;
  return n >= 1 ? (n > kMaxDecodeSplits ? kMaxDecodeSplits : n) : 0;
}

// false: every launch stays on the kStages ring (tests and A/Bs of the deep ring).
bool deep_ring_allowed() { return tuning_overrides().decode_deep_ring; }

dk::SplitMerge forced_merge() {
  switch (tuning_overrides().decode_merge) {
    case DecodeMergeOverride::cluster: return dk::SplitMerge::cluster;
    case DecodeMergeOverride::workspace: return dk::SplitMerge::workspace;
    default: return dk::SplitMerge::none;
  }
}

// A plan with `num_splits` splits merged by `merge`: keys_per_split and the workspace
// consistent with it (the cluster merge needs none: that is how a run tells the two apart).
DecodePlan plan_with_splits(const DecodeProblem& pr, int num_splits, dk::SplitMerge merge) {
  const DecodeShape shape = decode_shape(pr);
  DecodePlan plan;
  plan.problem = pr;
  plan.num_splits = num_splits < 1 ? 1 : num_splits;
  plan.keys_per_split = dk::split_keys(pr.max_seqlen_k, plan.num_splits, shape.block_n);
  if (plan.num_splits > 1 && merge != dk::SplitMerge::cluster) {
    plan.workspace_bytes =
        dk::workspace_layout(plan.num_splits, pr.batch, pr.q_per_seq, pr.heads_q, pr.head_dim_v).bytes;
  }
  return plan;
}

// The merge a plan asks for: none (one split), the cluster (a split plan without workspace:
// plan_with_splits) or the workspace and the combine kernel.
dk::SplitMerge plan_merge(const DecodePlan& plan) {
  return plan.num_splits == 1 ? dk::SplitMerge::none
         : plan.workspace_bytes == 0 ? dk::SplitMerge::cluster
                                     : dk::SplitMerge::workspace;
}

}  // namespace

void cuda_plan_decode(const DecodeProblem& pr, DecodePlan& plan) {
  check_supported(pr);
  const DecodeShape shape = decode_shape(pr);
  DecodeDeviceScope scope(pr.device_index);
  // Prepares the kernel on the device (shared-memory opt-in first, then the occupancy query)
  // and caches it, so a run (possibly inside a graph capture) makes no runtime query.
  const dk::DecodeKernelInfo info = kernel_info(pr, shape.mtiles);
  if (info.blocks_per_sm < 1) throw_cannot_run(pr, shape.mtiles, info);
  if (cached_device_attribute<cudaDevAttrComputeCapabilityMajor>(pr.device_index) >= 9) {
    if (pr.dtype == DType::bf16) ck::prepare_combine<float, __nv_bfloat16>(pr.device_index);
    else ck::prepare_combine<float, __half>(pr.device_index);
  }
  const dk::SplitMerge merge = forced_merge();
  const int max_cluster = merge == dk::SplitMerge::workspace ? 0 : info.max_cluster;
  dk::SplitChoice choice;
  choice.num_splits = forced_splits();
  if (choice.num_splits == 0) {
    const DeviceInfo device = cuda_query_device(pr.device_index);
    const std::int64_t work = static_cast<std::int64_t>(pr.batch) * pr.heads_kv * shape.row_chunks;
    // The deep ring's shared memory holds one block per SM: its cluster residency is the plan's.
    choice = dk::choose_decode_splits(device.sm_count, info.blocks_per_sm, work, pr.max_seqlen_k, shape.block_n,
                                      max_cluster, /*prefer_cluster=*/merge == dk::SplitMerge::cluster,
                                      split_kv::kDefaultMaxSplits, info.deep_ring ? info.deep_active_clusters : nullptr);
  } else if (choice.num_splits > 1) {
    choice.merge = choice.num_splits <= max_cluster ? dk::SplitMerge::cluster : dk::SplitMerge::workspace;
  }
  plan = plan_with_splits(pr, choice.num_splits, choice.merge);
}

dk::DecodeParams make_decode_params(const DecodePlan& plan, const AttentionProblem& p) {
  const DecodeProblem& pr = plan.problem;
  const DecodeShape shape = decode_shape(pr);
  // Paged caches: the kernel addresses rows with 32-bit byte strides (one wide multiply-add
  // each); a page or row stride of 4 GiB or more is refused before anything launches.
  std::uint32_t page_row_bytes[4] = {};
  if (p.page_size > 0) {
    const std::pair<const char*, std::int64_t> strides[4] = {
        {"k", p.k_batch_stride}, {"k", p.k_row_stride}, {"v", p.v_batch_stride}, {"v", p.v_row_stride}};
    for (int i = 0; i < 4; ++i) {
      const std::int64_t bytes = strides[i].second * static_cast<std::int64_t>(dtype_size(pr.dtype));
      if (bytes < 0 || bytes > 0xffffffffLL) {
        throw ArgumentError(strides[i].first, std::string("the paged GPU decode takes page and row strides below 4 GiB, got ") +
                                                  std::to_string(bytes) + " bytes");
      }
      page_row_bytes[i] = static_cast<std::uint32_t>(bytes);
    }
  }

  dk::DecodeParams params;
  params.q = p.q;
  params.q_batch_stride = p.q_batch_stride;
  params.q_row_stride = p.q_row_stride;
  params.q_head_stride = p.q_head_stride;
  params.k = p.k;
  params.k_batch_stride = p.k_batch_stride;
  params.k_row_stride = p.k_row_stride;
  params.k_head_stride = p.k_head_stride;
  params.v = p.v;
  params.v_batch_stride = p.v_batch_stride;
  params.v_row_stride = p.v_row_stride;
  params.v_head_stride = p.v_head_stride;
  params.o = p.o;
  params.o_batch_stride = p.o_batch_stride;
  params.o_row_stride = p.o_row_stride;
  params.o_head_stride = p.o_head_stride;
  params.lse = p.lse;
  params.lse_batch_stride = p.lse_batch_stride;
  params.lse_head_stride = p.lse_head_stride;
  params.sinks = p.sinks;
  params.seqlens_k = p.seqlens_k;
  if (p.page_size > 0) {
    params.page_table = p.page_table;
    params.page_table_stride = p.page_table_stride;
    params.num_pages = p.num_pages;
    params.page_div = FastDivmod(p.page_size);
    params.k_page_bytes = page_row_bytes[0];
    params.k_row_bytes = page_row_bytes[1];
    params.v_page_bytes = page_row_bytes[2];
    params.v_row_bytes = page_row_bytes[3];
  }
  params.batch = pr.batch;
  params.q_per_seq = pr.q_per_seq;
  params.group = shape.group;
  params.group_div = FastDivmod(shape.group);
  params.heads_kv = pr.heads_kv;
  params.heads_q = pr.heads_q;
  // Lengths are clamped on the device to what both the plan and the K/V tensors hold
  // (p.seqlen_k is the capacity: Smax, or max_pages * page_size).
  params.kv_capacity = pr.max_seqlen_k;
  if (p.seqlen_k < params.kv_capacity) params.kv_capacity = p.seqlen_k;  // 0: no key (e.g. a pool of no pages)
  params.num_splits = plan.num_splits;
  params.keys_per_split_static = dk::split_keys(params.kv_capacity, plan.num_splits, shape.block_n);
  const float scale = p.softmax_scale != 0.0f ? p.softmax_scale : 1.0f / std::sqrt(static_cast<float>(pr.head_dim));
  if (p.softcap > 0.0f) {
    params.score_scale = scale / p.softcap;
    params.softcap_log2 = p.softcap * kLog2e;
  } else {
    params.score_scale = scale * kLog2e;
    params.softcap_log2 = 0.0f;
  }
  params.window_left = p.window_left;
  params.window_right = p.window_right;
  params.merge = plan_merge(plan);
  return params;
}

void cuda_decode(const DecodePlan& plan, const AttentionProblem& p, void* workspace) {
  const DecodeProblem& pr = plan.problem;
  check_supported(pr);
  const DecodeShape shape = decode_shape(pr);
  const int num_splits = plan.num_splits;
  if (num_splits < 1 || num_splits > kMaxDecodeSplits) {
    throw ArgumentError("plan.num_splits", "expected 1.." + std::to_string(kMaxDecodeSplits) + ", got " +
                                               std::to_string(num_splits) + " (use plan_decode)");
  }
  const dk::SplitMerge merge = plan_merge(plan);
  const dk::WorkspaceLayout ws = merge == dk::SplitMerge::workspace
                                     ? dk::workspace_layout(num_splits, pr.batch, pr.q_per_seq, pr.heads_q, pr.head_dim_v)
                                     : dk::WorkspaceLayout{};
  if (plan.workspace_bytes < ws.bytes) {
    throw ArgumentError("plan.workspace_bytes", std::to_string(plan.workspace_bytes) + " bytes, but " +
                                                    std::to_string(num_splits) + " splits need " +
                                                    std::to_string(ws.bytes) + " (use plan_decode)");
  }
  if (merge == dk::SplitMerge::workspace && workspace == nullptr) {
    throw ArgumentError("workspace", "null, but the plan needs " + std::to_string(ws.bytes) + " bytes");
  }
  if (pr.batch == 0 || pr.heads_kv == 0) return;  // nothing to launch (graph capture sees no node)
  if (p.seqlens_k == nullptr) throw ArgumentError("seqlens_k", "required by the GPU decode");
  dk::DecodeParams params = make_decode_params(plan, p);

  DecodeDeviceScope scope(pr.device_index);
  const dk::DecodeKernelInfo info = kernel_info(pr, shape.mtiles);  // cached by the plan
  if (merge == dk::SplitMerge::cluster) {
    const int max_cluster = info.max_cluster;
    if (num_splits > max_cluster) {
      throw ArgumentError("plan.workspace_bytes",
                          "0 with " + std::to_string(num_splits) + " splits asks for the cluster merge, which this "
                          "kernel and device take up to " + std::to_string(max_cluster) +
                          " splits (0: none); give the plan its workspace (use plan_decode)");
    }
  }
  const cudaStream_t stream = static_cast<cudaStream_t>(p.stream);

  if (merge == dk::SplitMerge::workspace) {
    auto* base = static_cast<unsigned char*>(workspace);
    params.o_parts = reinterpret_cast<float*>(base + ws.o_parts_offset);
    params.lse_parts = reinterpret_cast<float*>(base + ws.lse_parts_offset);
  }

  const dim3 grid(static_cast<unsigned>(num_splits), static_cast<unsigned>(pr.heads_kv * shape.row_chunks),
                  static_cast<unsigned>(pr.batch));
  const int clusters_resident = num_splits <= dk::kMaxClusterSplits ? info.deep_active_clusters[num_splits] : 0;
  params.deep_ring = info.deep_ring && deep_ring_allowed() &&
                     dk::choose_deep_ring(p.page_size > 0, static_cast<std::int64_t>(grid.y) * grid.z, num_splits,
                                          ceil_div(params.keys_per_split_static, shape.block_n), merge, info.sm_count,
                                          clusters_resident);
  const cudaError_t launched = launch_kernel(pr, shape.mtiles, params, grid, stream);
  if (launched != cudaSuccess) {
    throw RuntimeError(std::string("flashbuf decode: launching the kernel failed: ") + cudaGetErrorName(launched) +
                       " (" + cudaGetErrorString(launched) + ")");
  }
  if (merge != dk::SplitMerge::workspace) return;

  // The combine: the merge_states kernel over the workspace, with the two-level token index
  // of the decode outputs (token = b * q_per_seq + i).
  ck::CombineParams c;
  c.num_parts = num_splits;
  c.tokens = pr.batch * pr.q_per_seq;
  c.tokens_inner = pr.q_per_seq;
  c.heads = pr.heads_q;
  c.head_dim_v = pr.head_dim_v;
  c.o_parts = params.o_parts;
  c.op_head_stride = pr.head_dim_v;
  c.op_token_stride = static_cast<std::int64_t>(pr.heads_q) * pr.head_dim_v;
  c.op_part_stride = c.op_token_stride * c.tokens;
  c.lse_parts = params.lse_parts;
  c.lp_head_stride = 1;
  c.lp_token_stride = pr.heads_q;
  c.lp_part_stride = static_cast<std::int64_t>(pr.heads_q) * c.tokens;
  c.o = p.o;
  c.o_outer_stride = p.o_batch_stride;
  c.o_inner_stride = p.o_row_stride;
  c.o_head_stride = p.o_head_stride;
  c.lse = p.lse;
  c.sinks = p.sinks;  // the sink joins each row once, after the splits are merged
  c.lse_outer_stride = p.lse_batch_stride;
  c.lse_inner_stride = 1;
  c.lse_head_stride = p.lse_head_stride;
  const bool programmatic = cached_device_attribute<cudaDevAttrComputeCapabilityMajor>(pr.device_index) >= 9;
  const cudaError_t err = pr.dtype == DType::bf16
                              ? ck::launch_combine<float, __nv_bfloat16>(c, stream, programmatic, pr.device_index)
                              : ck::launch_combine<float, __half>(c, stream, programmatic, pr.device_index);
  FLASHBUF_CUDA_CHECK(err);
}

}  // namespace flashbuf::detail
