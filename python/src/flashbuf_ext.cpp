// flashbuf._C: the nanobind binding of the public C++ API (include/flashbuf/flashbuf.hpp) for
// the Python package in python/flashbuf. It sits in the tools layer and only converts: arrays
// arrive through DLPack as nb::ndarray (PyTorch tensors on CUDA or the CPU, NumPy arrays),
// become non-owning TensorViews, and go to the C++ entry points unchanged; outputs are
// allocated by the Python side. Nothing is copied, and all validation is the library's.
//
// NumPy has no bfloat16 and ml_dtypes' bfloat16 cannot cross DLPack, so the Python layer hands
// such arrays over as their bit pattern in uint16; this binding reads uint16 as bf16 (the
// Python layer refuses genuine uint16 input before it gets here).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "flashbuf/flashbuf.hpp"
#include "tuning_env.hpp"

namespace nb = nanobind;

namespace {

using InArray = nb::ndarray<nb::ro>;  // inputs: read-only arrays are fine
using OutArray = nb::ndarray<>;       // outputs and the workspace: writable

// What an argument of an unsupported dtype is told: data (q, k, v, out, sinks) is bfloat16,
// float16 or float32, index arrays are int32. Exported as _C.EXPECTED_DTYPES, so that the
// Python checks (NumPy and torch inputs, before DLPack) tell the same.
const std::string kExpectedDtypes =
    "expected bfloat16, float16 or float32 (data) or int32 (offsets, lengths, page tables)";

flashbuf::DType dtype_of(const std::string& name, nb::dlpack::dtype dt) {
  using Code = nb::dlpack::dtype_code;
  if (dt.lanes == 1 && dt.bits == 16 && dt.code == static_cast<std::uint8_t>(Code::Bfloat))
    return flashbuf::DType::bf16;
  if (dt.lanes == 1 && dt.bits == 16 && dt.code == static_cast<std::uint8_t>(Code::UInt))
    return flashbuf::DType::bf16;  // bfloat16 bits from NumPy (see the header comment)
  if (dt.lanes == 1 && dt.bits == 16 && dt.code == static_cast<std::uint8_t>(Code::Float))
    return flashbuf::DType::fp16;
  if (dt.lanes == 1 && dt.bits == 32 && dt.code == static_cast<std::uint8_t>(Code::Float))
    return flashbuf::DType::fp32;
  if (dt.lanes == 1 && dt.bits == 32 && dt.code == static_cast<std::uint8_t>(Code::Int))
    return flashbuf::DType::int32;
  throw flashbuf::ArgumentError(
      name,
      "unsupported dtype (DLPack code " + std::to_string(dt.code) + ", " + std::to_string(dt.bits) +
          " bits); " + kExpectedDtypes,
      /*type_error=*/true);
}

// Where an array's memory lives, from its DLPack device type alone (never from the pointer):
// CPU and pinned host memory (kDLCUDAHost, readable by host code) are host memory; CUDA device
// and managed memory are CUDA, so the library reads them only through a device-to-host copy.
// Anything else (ROCm, Vulkan, meta, ...) is refused here, before a pointer is looked at.
std::pair<flashbuf::DeviceKind, int> device_of(const std::string& name, int device_type, int device_id) {
  switch (device_type) {
    case nb::device::cpu::value:
    case nb::device::cuda_host::value:
      return {flashbuf::DeviceKind::cpu, 0};
    case nb::device::cuda::value:
    case nb::device::cuda_managed::value:
      return {flashbuf::DeviceKind::cuda, device_id};
    default:
      throw flashbuf::ArgumentError(name, "tensors must live on the CPU or a CUDA device (DLPack device type " +
                                              std::to_string(device_type) + ")");
  }
}

// The arrays of one call, kept alive until it returns.
struct Arrays {
  std::vector<InArray> inputs;
  std::vector<OutArray> outputs;
};

void check_rank(const std::string& name, std::size_t rank) {
  if (rank == 0) throw flashbuf::ArgumentError(name, "expected a tensor, got a 0-d scalar");
  if (rank > static_cast<std::size_t>(flashbuf::kMaxRank))
    throw flashbuf::ArgumentError(name, "rank " + std::to_string(rank) + " exceeds " +
                                            std::to_string(flashbuf::kMaxRank));
}

template <class A>
flashbuf::TensorView view_of_array(const std::string& name, const A& a, const void* data) {
  check_rank(name, a.ndim());
  flashbuf::TensorView v;
  v.data = const_cast<void*>(data);
  v.dtype = dtype_of(name, a.dtype());
  v.rank = static_cast<int>(a.ndim());
  for (int i = 0; i < v.rank; ++i) {
    v.shape[i] = static_cast<std::int64_t>(a.shape(i));
    v.stride[i] = static_cast<std::int64_t>(a.stride(i));  // elements, as DLPack gives them
  }
  std::tie(v.device, v.device_index) = device_of(name, a.device_type(), a.device_id());
  return v;
}

flashbuf::DType dtype_from_name(const std::string& name, const std::string& dtype) {
  if (dtype == "bf16") return flashbuf::DType::bf16;
  if (dtype == "fp16") return flashbuf::DType::fp16;
  if (dtype == "fp32") return flashbuf::DType::fp32;
  if (dtype == "int32") return flashbuf::DType::int32;
  throw flashbuf::ArgumentError(name, "unsupported dtype " + dtype + "; " + kExpectedDtypes,
                                /*type_error=*/true);
}

// A tensor described by its metadata alone, (dtype, shape, strides, device type, device
// index), as the operators' fake functions pass them: no data pointer (CheckScope::metadata).
flashbuf::TensorView view_of_description(const std::string& name, const nb::tuple& d) {
  if (d.size() != 5) throw flashbuf::ArgumentError(name, "a tensor description has 5 fields");
  const auto shape = nb::cast<std::vector<std::int64_t>>(d[1]);
  const auto strides = nb::cast<std::vector<std::int64_t>>(d[2]);
  check_rank(name, shape.size());
  if (strides.size() != shape.size()) throw flashbuf::ArgumentError(name, "shape and strides differ in rank");
  flashbuf::TensorView v;
  v.dtype = dtype_from_name(name, nb::cast<std::string>(d[0]));
  v.rank = static_cast<int>(shape.size());
  for (int i = 0; i < v.rank; ++i) {
    v.shape[i] = shape[i];
    v.stride[i] = strides[i];
  }
  const std::string kind = nb::cast<std::string>(d[3]);
  if (kind == "cpu") {
    v.device = flashbuf::DeviceKind::cpu;
  } else if (kind == "cuda") {
    v.device = flashbuf::DeviceKind::cuda;
    v.device_index = nb::cast<int>(d[4]);
  } else {
    throw flashbuf::ArgumentError(name, "tensors must live on the CPU or a CUDA device, got " + kind);
  }
  return v;
}

std::string python_type_name(nb::handle h) { return nb::cast<std::string>(nb::type_name(h.type())); }

// One tensor argument: None (absent), a description (metadata checks only), or an array
// (NumPy, PyTorch or anything else DLPack speaks). Conversion failures name the argument
// instead of nanobind's "incompatible function arguments".
flashbuf::TensorView input_view(const std::string& name, nb::handle h, Arrays& keep) {
  if (h.is_none()) return {};
  if (nb::isinstance<nb::tuple>(h)) return view_of_description(name, nb::borrow<nb::tuple>(h));
  InArray a;
  if (!nb::try_cast<InArray>(h, a)) {
    throw flashbuf::ArgumentError(name, "expected an array (a NumPy array or a torch.Tensor) of bfloat16, float16, "
                                        "float32 or int32 that DLPack can export, got " + python_type_name(h),
                                  /*type_error=*/true);
  }
  keep.inputs.push_back(a);
  return view_of_array(name, a, a.data());
}

flashbuf::TensorView output_view(const std::string& name, nb::handle h, Arrays& keep) {
  if (h.is_none()) return {};
  OutArray a;
  if (!nb::try_cast<OutArray>(h, a)) {
    InArray ro;
    const bool read_only = nb::try_cast<InArray>(h, ro);
    throw flashbuf::ArgumentError(name, read_only ? std::string("is read-only; an output must be writable")
                                                  : "expected a writable array (a NumPy array or a torch.Tensor), got " +
                                                        python_type_name(h),
                                  /*type_error=*/!read_only);
  }
  keep.outputs.push_back(a);
  return view_of_array(name, a, a.data());
}

nb::tuple shape_tuple(int rank, const std::int64_t* extents) {
  nb::list l;
  for (int i = 0; i < rank; ++i) l.append(extents[i]);
  return nb::tuple(l);
}

nb::tuple shapes_tuple(const flashbuf::OutputShapes& s) {
  return nb::make_tuple(shape_tuple(s.o_rank, s.o), shape_tuple(s.lse_rank, s.lse));
}

flashbuf::CheckScope scope_of(bool metadata_only) {
  return metadata_only ? flashbuf::CheckScope::metadata : flashbuf::CheckScope::full;
}

// causal == window (left, 0), as in FlashAttention: causal caps the right side of any window.
flashbuf::Mask make_mask(bool causal, int window_left, int window_right) {
  if (causal) return window_left < 0 ? flashbuf::Mask::causal() : flashbuf::Mask::window(window_left, 0);
  if (window_left < 0 && window_right < 0) return flashbuf::Mask::none();
  return flashbuf::Mask::window(window_left, window_right);
}

flashbuf::Backend parse_backend(const std::string& name) {
  if (name == "auto") return flashbuf::Backend::automatic;
  if (name == "cpu") return flashbuf::Backend::cpu;
  if (name == "sm80") return flashbuf::Backend::sm80;
  if (name == "sm90") return flashbuf::Backend::sm90;
  throw flashbuf::ArgumentError("backend", "unknown backend '" + name + "' (auto, cpu, sm80, sm90)");
}

flashbuf::DType parse_dtype(const std::string& name) {
  if (name == "bf16") return flashbuf::DType::bf16;
  if (name == "fp16") return flashbuf::DType::fp16;
  if (name == "fp32") return flashbuf::DType::fp32;
  throw flashbuf::ArgumentError("dtype", "unsupported dtype '" + name + "' (bf16, fp16, fp32)", true);
}

void* stream_of(std::uintptr_t stream) { return reinterpret_cast<void*>(stream); }

// The scalar and index arguments of an attention call, shared by attention and its shapes.
struct AttentionScalars {
  int max_seqlen_q, max_seqlen_k;
  float softmax_scale;
  bool causal;
  int window_left, window_right;
  float softcap;
};

flashbuf::AttentionArgs attention_args(nb::handle q, nb::handle k, nb::handle v, nb::handle cu_seqlens_q,
                                       nb::handle cu_seqlens_k, nb::handle seqlens_k, nb::handle page_table,
                                       const AttentionScalars& x, Arrays& keep) {
  flashbuf::AttentionArgs args;
  args.q = input_view("q", q, keep);
  args.k = input_view("k", k, keep);
  args.v = input_view("v", v, keep);
  args.cu_seqlens_q = input_view("cu_seqlens_q", cu_seqlens_q, keep);
  args.cu_seqlens_k = input_view("cu_seqlens_k", cu_seqlens_k, keep);
  args.seqlens_k = input_view("seqlens_k", seqlens_k, keep);
  args.page_table = input_view("page_table", page_table, keep);
  args.max_seqlen_q = x.max_seqlen_q;
  args.max_seqlen_k = x.max_seqlen_k;
  args.softmax_scale = x.softmax_scale;
  args.mask = make_mask(x.causal, x.window_left, x.window_right);
  args.softcap = x.softcap;
  return args;
}

std::string attention(nb::handle q, nb::handle k, nb::handle v, nb::handle o, nb::handle lse, nb::handle cu_seqlens_q,
                      nb::handle cu_seqlens_k, nb::handle seqlens_k, nb::handle page_table, int max_seqlen_q,
                      int max_seqlen_k, float softmax_scale, bool causal, int window_left, int window_right,
                      float softcap, std::uintptr_t stream, const std::string& backend, nb::handle sinks,
                      bool check_inputs, int num_threads) {
  Arrays keep;
  flashbuf::AttentionArgs args =
      attention_args(q, k, v, cu_seqlens_q, cu_seqlens_k, seqlens_k, page_table,
                     {max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap}, keep);
  args.sinks = input_view("sinks", sinks, keep);
  args.o = output_view("o", o, keep);
  args.lse = output_view("lse", lse, keep);
  args.stream = stream_of(stream);
  args.backend = parse_backend(backend);
  args.check_index_contents = check_inputs;
  args.num_threads = num_threads;
  flashbuf::Backend ran;
  {
    nb::gil_scoped_release release;  // the CPU backend computes here; CUDA only launches
    ran = flashbuf::attention(args);
  }
  return flashbuf::backend_name(ran);
}

// The shapes of o and lse for these inputs, after every input check (metadata_only: the
// arguments may be descriptions, nothing is dereferenced).
nb::tuple attention_shapes(nb::handle q, nb::handle k, nb::handle v, nb::handle cu_seqlens_q, nb::handle cu_seqlens_k,
                           nb::handle seqlens_k, nb::handle page_table, int max_seqlen_q, int max_seqlen_k,
                           float softmax_scale, bool causal, int window_left, int window_right, float softcap,
                           nb::handle sinks, bool metadata_only) {
  Arrays keep;
  flashbuf::AttentionArgs args =
      attention_args(q, k, v, cu_seqlens_q, cu_seqlens_k, seqlens_k, page_table,
                     {max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap}, keep);
  args.sinks = input_view("sinks", sinks, keep);
  return shapes_tuple(flashbuf::attention_output_shapes(args, scope_of(metadata_only)));
}

// The plan travels through Python (and through torch.library ops, whose arguments are plain
// ints) as a flat tuple; these two functions are the only places that know its order.
using PlanTuple = std::tuple<int, int, int, int, int, int, int, int, int, int, int, int, int, std::int64_t>;

PlanTuple plan_to_tuple(const flashbuf::DecodePlan& plan) {
  const flashbuf::DecodeProblem& p = plan.problem;
  return {p.batch,
          p.q_per_seq,
          p.heads_q,
          p.heads_kv,
          p.head_dim,
          p.head_dim_v,
          p.max_seqlen_k,
          p.page_size,
          static_cast<int>(p.dtype),
          static_cast<int>(p.device),
          p.device_index,
          plan.num_splits,
          plan.keys_per_split,
          static_cast<std::int64_t>(plan.workspace_bytes)};
}

flashbuf::DecodePlan plan_from_list(const std::vector<std::int64_t>& f) {
  if (f.size() != std::tuple_size_v<PlanTuple>)
    throw flashbuf::ArgumentError("plan", "expected " + std::to_string(std::tuple_size_v<PlanTuple>) +
                                              " fields, got " + std::to_string(f.size()));
  flashbuf::DecodePlan plan;
  flashbuf::DecodeProblem& p = plan.problem;
  p.batch = static_cast<int>(f[0]);
  p.q_per_seq = static_cast<int>(f[1]);
  p.heads_q = static_cast<int>(f[2]);
  p.heads_kv = static_cast<int>(f[3]);
  p.head_dim = static_cast<int>(f[4]);
  p.head_dim_v = static_cast<int>(f[5]);
  p.max_seqlen_k = static_cast<int>(f[6]);
  p.page_size = static_cast<int>(f[7]);
  p.dtype = static_cast<flashbuf::DType>(f[8]);
  p.device = static_cast<flashbuf::DeviceKind>(f[9]);
  p.device_index = static_cast<int>(f[10]);
  plan.num_splits = static_cast<int>(f[11]);
  plan.keys_per_split = static_cast<int>(f[12]);
  plan.workspace_bytes = static_cast<std::size_t>(f[13]);
  return plan;
}

PlanTuple plan_decode(int batch, int q_per_seq, int heads_q, int heads_kv, int head_dim, int head_dim_v,
                      int max_seqlen_k, int page_size, const std::string& dtype, const std::string& device,
                      int device_index) {
  flashbuf::DecodeProblem p;
  p.batch = batch;
  p.q_per_seq = q_per_seq;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.head_dim = head_dim;
  p.head_dim_v = head_dim_v;
  p.max_seqlen_k = max_seqlen_k;
  p.page_size = page_size;
  p.dtype = parse_dtype(dtype);
  if (device == "cpu") {
    p.device = flashbuf::DeviceKind::cpu;
  } else if (device == "cuda") {
    p.device = flashbuf::DeviceKind::cuda;
  } else {
    throw flashbuf::ArgumentError("device", "expected 'cpu' or 'cuda', got '" + device + "'");
  }
  p.device_index = device_index;
  return plan_to_tuple(flashbuf::plan_decode(p));
}

flashbuf::DecodeArgs decode_args(nb::handle q, nb::handle k, nb::handle v, nb::handle seqlens_k,
                                 nb::handle page_table, float softmax_scale, bool causal, int window_left,
                                 int window_right, float softcap, Arrays& keep) {
  flashbuf::DecodeArgs args;
  args.q = input_view("q", q, keep);
  args.k = input_view("k", k, keep);
  args.v = input_view("v", v, keep);
  args.seqlens_k = input_view("seqlens_k", seqlens_k, keep);
  args.page_table = input_view("page_table", page_table, keep);
  args.softmax_scale = softmax_scale;
  args.mask = make_mask(causal, window_left, window_right);
  args.softcap = softcap;
  return args;
}

std::string decode(const std::vector<std::int64_t>& plan_fields, nb::handle q, nb::handle k, nb::handle v,
                   nb::handle seqlens_k, nb::handle page_table, nb::handle o, nb::handle lse, nb::handle workspace,
                   float softmax_scale, bool causal, int window_left, int window_right, float softcap,
                   std::uintptr_t stream, nb::handle sinks, bool check_inputs, int num_threads) {
  const flashbuf::DecodePlan plan = plan_from_list(plan_fields);
  Arrays keep;
  flashbuf::DecodeArgs args =
      decode_args(q, k, v, seqlens_k, page_table, softmax_scale, causal, window_left, window_right, softcap, keep);
  args.sinks = input_view("sinks", sinks, keep);
  args.o = output_view("o", o, keep);
  args.lse = output_view("lse", lse, keep);
  if (!workspace.is_none()) {
    // Raw bytes of any dtype (the plan's DecodePlan allocates uint8).
    OutArray ws;
    if (!nb::try_cast<OutArray>(workspace, ws)) {
      throw flashbuf::ArgumentError("workspace", "expected a writable array, got " + python_type_name(workspace), true);
    }
    keep.outputs.push_back(ws);
    const auto [ws_device, ws_index] = device_of("workspace", ws.device_type(), ws.device_id());
    // The kernels write partial results into the workspace: it must be memory of the plan's
    // device (a host buffer under a CUDA plan, or the reverse, is refused, not dereferenced).
    if (ws_device != plan.problem.device ||
        (ws_device == flashbuf::DeviceKind::cuda && ws_index != plan.problem.device_index)) {
      auto where = [](flashbuf::DeviceKind d, int i) {
        return d == flashbuf::DeviceKind::cuda ? "cuda:" + std::to_string(i) : std::string("cpu");
      };
      throw flashbuf::ArgumentError("workspace", "is on " + where(ws_device, ws_index) + " but the plan is for " +
                                                     where(plan.problem.device, plan.problem.device_index));
    }
    if (ws.nbytes() < plan.workspace_bytes)
      throw flashbuf::ArgumentError("workspace", "holds " + std::to_string(ws.nbytes()) + " bytes, the plan needs " +
                                                     std::to_string(plan.workspace_bytes));
    args.workspace = plan.workspace_bytes > 0 ? ws.data() : nullptr;
  }
  args.stream = stream_of(stream);
  args.check_index_contents = check_inputs;
  args.num_threads = num_threads;
  flashbuf::Backend ran;
  {
    nb::gil_scoped_release release;
    ran = flashbuf::decode(plan, args);
  }
  return flashbuf::backend_name(ran);
}

nb::tuple decode_shapes(const std::vector<std::int64_t>& plan_fields, nb::handle q, nb::handle k, nb::handle v,
                        nb::handle seqlens_k, nb::handle page_table, float softmax_scale, bool causal,
                        int window_left, int window_right, float softcap, nb::handle sinks, bool metadata_only) {
  const flashbuf::DecodePlan plan = plan_from_list(plan_fields);
  Arrays keep;
  flashbuf::DecodeArgs args =
      decode_args(q, k, v, seqlens_k, page_table, softmax_scale, causal, window_left, window_right, softcap, keep);
  args.sinks = input_view("sinks", sinks, keep);
  return shapes_tuple(flashbuf::decode_output_shapes(plan, args, scope_of(metadata_only)));
}

std::string merge_states(nb::handle o_parts, nb::handle lse_parts, nb::handle o, nb::handle lse,
                         std::uintptr_t stream) {
  Arrays keep;
  flashbuf::MergeStatesArgs args;
  args.o_parts = input_view("o_parts", o_parts, keep);
  args.lse_parts = input_view("lse_parts", lse_parts, keep);
  args.o = output_view("o", o, keep);
  args.lse = output_view("lse", lse, keep);
  args.stream = stream_of(stream);
  flashbuf::Backend ran;
  {
    nb::gil_scoped_release release;
    ran = flashbuf::merge_states(args);
  }
  return flashbuf::backend_name(ran);
}

// The caches are outputs (written in place), or descriptions for the metadata checks.
flashbuf::AppendKvArgs append_args(nb::handle k_cache, nb::handle v_cache, nb::handle k, nb::handle v,
                                   nb::handle cache_seqlens, nb::handle cache_batch_idx, nb::handle page_table,
                                   bool descriptions, Arrays& keep) {
  const auto cache_view = descriptions ? input_view : output_view;
  flashbuf::AppendKvArgs args;
  args.k_cache = cache_view("k_cache", k_cache, keep);
  args.v_cache = cache_view("v_cache", v_cache, keep);
  args.k = input_view("k", k, keep);
  args.v = input_view("v", v, keep);
  args.cache_seqlens = input_view("cache_seqlens", cache_seqlens, keep);
  args.cache_batch_idx = input_view("cache_batch_idx", cache_batch_idx, keep);
  args.page_table = input_view("page_table", page_table, keep);
  return args;
}

std::string append_kv(nb::handle k_cache, nb::handle v_cache, nb::handle k, nb::handle v, nb::handle cache_seqlens,
                      nb::handle cache_batch_idx, nb::handle page_table, std::uintptr_t stream, bool check_inputs) {
  Arrays keep;
  flashbuf::AppendKvArgs args =
      append_args(k_cache, v_cache, k, v, cache_seqlens, cache_batch_idx, page_table, /*descriptions=*/false, keep);
  args.stream = stream_of(stream);
  args.check_index_contents = check_inputs;
  flashbuf::Backend ran;
  {
    nb::gil_scoped_release release;
    ran = flashbuf::append_kv(args);
  }
  return flashbuf::backend_name(ran);
}

// append_kv's checks without the run (metadata_only: the arguments may be descriptions).
void append_kv_check(nb::handle k_cache, nb::handle v_cache, nb::handle k, nb::handle v, nb::handle cache_seqlens,
                     nb::handle cache_batch_idx, nb::handle page_table, bool metadata_only) {
  Arrays keep;
  const flashbuf::AppendKvArgs args =
      append_args(k_cache, v_cache, k, v, cache_seqlens, cache_batch_idx, page_table, metadata_only, keep);
  flashbuf::check_append_kv(args, scope_of(metadata_only));
}

nb::tuple merge_shapes(nb::handle o_parts, nb::handle lse_parts, bool metadata_only) {
  Arrays keep;
  flashbuf::MergeStatesArgs args;
  args.o_parts = input_view("o_parts", o_parts, keep);
  args.lse_parts = input_view("lse_parts", lse_parts, keep);
  return shapes_tuple(flashbuf::merge_output_shapes(args, scope_of(metadata_only)));
}

}  // namespace

NB_MODULE(_C, m) {
  m.doc() = "flashbuf C++ entry points (use the flashbuf package, not this module)";

  // ArgumentError: dtype problems become TypeError, everything else ValueError, same message.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const flashbuf::ArgumentError& e) {
      PyErr_SetString(e.is_type_error() ? PyExc_TypeError : PyExc_ValueError, e.what());
    } catch (const flashbuf::RuntimeError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  // Tuning overrides (flashbuf/tuning.hpp) for benchmarks: the variables of tools/tuning_env.hpp
  // as a mapping the caller read (bench/bench.py passes the environment's); the module itself
  // reads no environment. A bad value raises ValueError naming its variable.
  m.def("set_tuning_overrides", [](const std::map<std::string, std::string>& variables) {
    const flashbuf::TuningOverrides t = flashbuf::tools::tuning_overrides_from([&](const char* name) {
      const auto it = variables.find(name);
      return it == variables.end() ? std::string() : it->second;
    });
    flashbuf::set_tuning_overrides(t);
  }, nb::arg("variables"), "flashbuf::set_tuning_overrides from FLASHBUF_* variable text.");

  m.def("attention", &attention, nb::arg("q").none(), nb::arg("k").none(), nb::arg("v").none(),
        nb::arg("out").none(), nb::arg("lse").none(), nb::arg("cu_seqlens_q").none(), nb::arg("cu_seqlens_k").none(),
        nb::arg("seqlens_k").none(), nb::arg("page_table").none(), nb::arg("max_seqlen_q"), nb::arg("max_seqlen_k"),
        nb::arg("softmax_scale"), nb::arg("causal"), nb::arg("window_left"), nb::arg("window_right"),
        nb::arg("softcap"), nb::arg("stream"), nb::arg("backend") = "auto", nb::arg("sinks").none() = nb::none(),
        nb::arg("check_inputs") = false, nb::arg("num_threads") = 0,
        "Runs flashbuf::attention into preallocated out (and lse); returns the backend that ran.");
  m.def("attention_shapes", &attention_shapes, nb::arg("q").none(), nb::arg("k").none(), nb::arg("v").none(),
        nb::arg("cu_seqlens_q").none(), nb::arg("cu_seqlens_k").none(), nb::arg("seqlens_k").none(),
        nb::arg("page_table").none(), nb::arg("max_seqlen_q"), nb::arg("max_seqlen_k"), nb::arg("softmax_scale"),
        nb::arg("causal"), nb::arg("window_left"), nb::arg("window_right"), nb::arg("softcap"),
        nb::arg("sinks").none() = nb::none(), nb::arg("metadata_only") = false,
        "flashbuf::attention_output_shapes: checks the inputs, returns (o shape, lse shape). Tensors may be "
        "(dtype, shape, strides, device, index) descriptions with metadata_only.");
  m.def("plan_decode", &plan_decode, nb::arg("batch"), nb::arg("q_per_seq"), nb::arg("heads_q"),
        nb::arg("heads_kv"), nb::arg("head_dim"), nb::arg("head_dim_v"), nb::arg("max_seqlen_k"),
        nb::arg("page_size"), nb::arg("dtype"), nb::arg("device"), nb::arg("device_index"),
        "flashbuf::plan_decode; returns the plan as a flat tuple (workspace bytes last).");
  m.def("decode", &decode, nb::arg("plan"), nb::arg("q").none(), nb::arg("k").none(), nb::arg("v").none(),
        nb::arg("seqlens_k").none(), nb::arg("page_table").none(), nb::arg("out").none(), nb::arg("lse").none(),
        nb::arg("workspace").none(), nb::arg("softmax_scale"), nb::arg("causal"), nb::arg("window_left"),
        nb::arg("window_right"), nb::arg("softcap"), nb::arg("stream"), nb::arg("sinks").none() = nb::none(),
        nb::arg("check_inputs") = false, nb::arg("num_threads") = 0,
        "Runs flashbuf::decode with a plan tuple from plan_decode; returns the backend that ran.");
  m.def("decode_shapes", &decode_shapes, nb::arg("plan"), nb::arg("q").none(), nb::arg("k").none(),
        nb::arg("v").none(), nb::arg("seqlens_k").none(), nb::arg("page_table").none(), nb::arg("softmax_scale"),
        nb::arg("causal"), nb::arg("window_left"), nb::arg("window_right"), nb::arg("softcap"),
        nb::arg("sinks").none() = nb::none(), nb::arg("metadata_only") = false, "flashbuf::decode_output_shapes: (o shape, lse shape).");
  m.def("merge_states", &merge_states, nb::arg("o_parts").none(), nb::arg("lse_parts").none(),
        nb::arg("out").none(), nb::arg("lse").none(), nb::arg("stream"),
        "Runs flashbuf::merge_states into preallocated out (and lse); returns the backend that ran.");
  m.def("merge_shapes", &merge_shapes, nb::arg("o_parts").none(), nb::arg("lse_parts").none(),
        nb::arg("metadata_only") = false, "flashbuf::merge_output_shapes: (o shape, lse shape).");
  m.def("append_kv", &append_kv, nb::arg("k_cache").none(), nb::arg("v_cache").none(), nb::arg("k").none(),
        nb::arg("v").none(), nb::arg("cache_seqlens").none(), nb::arg("cache_batch_idx").none(),
        nb::arg("page_table").none(), nb::arg("stream"), nb::arg("check_inputs") = false,
        "Runs flashbuf::append_kv: k and v written into k_cache and v_cache in place; returns the backend.");
  m.def("append_kv_check", &append_kv_check, nb::arg("k_cache").none(), nb::arg("v_cache").none(),
        nb::arg("k").none(), nb::arg("v").none(), nb::arg("cache_seqlens").none(), nb::arg("cache_batch_idx").none(),
        nb::arg("page_table").none(), nb::arg("metadata_only") = false,
        "flashbuf::check_append_kv: append_kv's checks without the copy.");
  m.def("cuda_available", &flashbuf::cuda_available);
  m.def(
      "cuda_device_info",
      [](int index) {
        const flashbuf::DeviceInfo info = flashbuf::cuda_device_info(index);
        nb::dict d;
        d["name"] = info.name;
        d["major"] = info.major;
        d["minor"] = info.minor;
        d["sm_count"] = info.sm_count;
        return d;
      },
      nb::arg("device_index") = 0);
  m.def("build_info", &flashbuf::build_info);
  m.attr("__version__") = FLASHBUF_VERSION_STRING;  // include/flashbuf/version.hpp
  m.attr("PLAN_WORKSPACE_BYTES_INDEX") = std::tuple_size_v<PlanTuple> - 1;
  m.attr("EXPECTED_DTYPES") = kExpectedDtypes;
}
