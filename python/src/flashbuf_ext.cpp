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
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "flashbuf/flashbuf.hpp"

namespace nb = nanobind;

namespace {

using Array = nb::ndarray<>;
using OptArray = std::optional<Array>;

flashbuf::DType dtype_of(const std::string& name, const Array& a) {
  using Code = nb::dlpack::dtype_code;
  const nb::dlpack::dtype dt = a.dtype();
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
          " bits); expected bfloat16, float16, float32 or int32",
      /*type_error=*/true);
}

// Where an array's memory lives, from its DLPack device type alone (never from the pointer):
// CPU and pinned host memory (kDLCUDAHost, readable by host code) are host memory; CUDA device
// and managed memory are CUDA, so the library reads them only through a device-to-host copy.
// Anything else (ROCm, Vulkan, meta, ...) is refused here, before a pointer is looked at.
std::pair<flashbuf::DeviceKind, int> device_of(const std::string& name, const Array& a) {
  switch (a.device_type()) {
    case nb::device::cpu::value:
    case nb::device::cuda_host::value:
      return {flashbuf::DeviceKind::cpu, 0};
    case nb::device::cuda::value:
    case nb::device::cuda_managed::value:
      return {flashbuf::DeviceKind::cuda, a.device_id()};
    default:
      throw flashbuf::ArgumentError(name, "tensors must live on the CPU or a CUDA device (DLPack device type " +
                                              std::to_string(a.device_type()) + ")");
  }
}

flashbuf::TensorView view_of(const std::string& name, const Array& a) {
  if (a.ndim() == 0)
    throw flashbuf::ArgumentError(name, "expected a tensor, got a 0-d scalar");
  if (a.ndim() > static_cast<std::size_t>(flashbuf::kMaxRank))
    throw flashbuf::ArgumentError(name, "rank " + std::to_string(a.ndim()) + " exceeds " +
                                            std::to_string(flashbuf::kMaxRank));
  flashbuf::TensorView v;
  v.data = const_cast<void*>(a.data());
  v.dtype = dtype_of(name, a);
  v.rank = static_cast<int>(a.ndim());
  for (int i = 0; i < v.rank; ++i) {
    v.shape[i] = static_cast<std::int64_t>(a.shape(i));
    v.stride[i] = static_cast<std::int64_t>(a.stride(i));  // elements, as DLPack gives them
  }
  std::tie(v.device, v.device_index) = device_of(name, a);
  return v;
}

flashbuf::TensorView optional_view(const std::string& name, const OptArray& a) {
  return a ? view_of(name, *a) : flashbuf::TensorView{};
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

std::string attention(const Array& q, const Array& k, const Array& v, const Array& o, const OptArray& lse,
                      const OptArray& cu_seqlens_q, const OptArray& cu_seqlens_k, const OptArray& seqlens_k,
                      const OptArray& page_table, int max_seqlen_q, int max_seqlen_k, float softmax_scale,
                      bool causal, int window_left, int window_right, float softcap, std::uintptr_t stream,
                      const std::string& backend, int num_threads) {
  flashbuf::AttentionArgs args;
  args.q = view_of("q", q);
  args.k = view_of("k", k);
  args.v = view_of("v", v);
  args.o = view_of("o", o);
  args.lse = optional_view("lse", lse);
  args.cu_seqlens_q = optional_view("cu_seqlens_q", cu_seqlens_q);
  args.cu_seqlens_k = optional_view("cu_seqlens_k", cu_seqlens_k);
  args.seqlens_k = optional_view("seqlens_k", seqlens_k);
  args.page_table = optional_view("page_table", page_table);
  args.max_seqlen_q = max_seqlen_q;
  args.max_seqlen_k = max_seqlen_k;
  args.softmax_scale = softmax_scale;
  args.mask = make_mask(causal, window_left, window_right);
  args.softcap = softcap;
  args.stream = stream_of(stream);
  args.backend = parse_backend(backend);
  args.num_threads = num_threads;
  flashbuf::Backend ran;
  {
    nb::gil_scoped_release release;  // the CPU backend computes here; CUDA only launches
    ran = flashbuf::attention(args);
  }
  return flashbuf::backend_name(ran);
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

std::string decode(const std::vector<std::int64_t>& plan_fields, const Array& q, const Array& k, const Array& v,
                   const Array& seqlens_k, const OptArray& page_table, const Array& o, const OptArray& lse,
                   const OptArray& workspace, float softmax_scale, bool causal, int window_left,
                   int window_right, float softcap, std::uintptr_t stream, int num_threads) {
  const flashbuf::DecodePlan plan = plan_from_list(plan_fields);
  flashbuf::DecodeArgs args;
  args.q = view_of("q", q);
  args.k = view_of("k", k);
  args.v = view_of("v", v);
  args.seqlens_k = view_of("seqlens_k", seqlens_k);
  args.page_table = optional_view("page_table", page_table);
  args.o = view_of("o", o);
  args.lse = optional_view("lse", lse);
  if (workspace) {
    // The kernels write partial results into the workspace: it must be memory of the plan's
    // device (a host buffer under a CUDA plan, or the reverse, is refused, not dereferenced).
    const auto [ws_device, ws_index] = device_of("workspace", *workspace);
    if (ws_device != plan.problem.device ||
        (ws_device == flashbuf::DeviceKind::cuda && ws_index != plan.problem.device_index)) {
      auto where = [](flashbuf::DeviceKind d, int i) {
        return d == flashbuf::DeviceKind::cuda ? "cuda:" + std::to_string(i) : std::string("cpu");
      };
      throw flashbuf::ArgumentError("workspace", "is on " + where(ws_device, ws_index) + " but the plan is for " +
                                                     where(plan.problem.device, plan.problem.device_index));
    }
    if (workspace->nbytes() < plan.workspace_bytes)
      throw flashbuf::ArgumentError("workspace", "holds " + std::to_string(workspace->nbytes()) +
                                                     " bytes, the plan needs " +
                                                     std::to_string(plan.workspace_bytes));
    args.workspace = plan.workspace_bytes > 0 ? const_cast<void*>(workspace->data()) : nullptr;
  }
  args.softmax_scale = softmax_scale;
  args.mask = make_mask(causal, window_left, window_right);
  args.softcap = softcap;
  args.stream = stream_of(stream);
  args.num_threads = num_threads;
  flashbuf::Backend ran;
  {
    nb::gil_scoped_release release;
    ran = flashbuf::decode(plan, args);
  }
  return flashbuf::backend_name(ran);
}

std::string merge_states(const Array& o_parts, const Array& lse_parts, const Array& o, const OptArray& lse,
                         std::uintptr_t stream) {
  flashbuf::MergeStatesArgs args;
  args.o_parts = view_of("o_parts", o_parts);
  args.lse_parts = view_of("lse_parts", lse_parts);
  args.o = view_of("o", o);
  args.lse = optional_view("lse", lse);
  args.stream = stream_of(stream);
  flashbuf::Backend ran;
  {
    nb::gil_scoped_release release;
    ran = flashbuf::merge_states(args);
  }
  return flashbuf::backend_name(ran);
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

  m.def("attention", &attention, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("out"),
        nb::arg("lse").none(), nb::arg("cu_seqlens_q").none(), nb::arg("cu_seqlens_k").none(),
        nb::arg("seqlens_k").none(), nb::arg("page_table").none(), nb::arg("max_seqlen_q"),
        nb::arg("max_seqlen_k"), nb::arg("softmax_scale"), nb::arg("causal"), nb::arg("window_left"),
        nb::arg("window_right"), nb::arg("softcap"), nb::arg("stream"), nb::arg("backend") = "auto",
        nb::arg("num_threads") = 0,
        "Runs flashbuf::attention into preallocated out (and lse); returns the backend that ran.");
  m.def("plan_decode", &plan_decode, nb::arg("batch"), nb::arg("q_per_seq"), nb::arg("heads_q"),
        nb::arg("heads_kv"), nb::arg("head_dim"), nb::arg("head_dim_v"), nb::arg("max_seqlen_k"),
        nb::arg("page_size"), nb::arg("dtype"), nb::arg("device"), nb::arg("device_index"),
        "flashbuf::plan_decode; returns the plan as a flat tuple (workspace bytes last).");
  m.def("decode", &decode, nb::arg("plan"), nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("seqlens_k"),
        nb::arg("page_table").none(), nb::arg("out"), nb::arg("lse").none(), nb::arg("workspace").none(),
        nb::arg("softmax_scale"), nb::arg("causal"), nb::arg("window_left"), nb::arg("window_right"),
        nb::arg("softcap"), nb::arg("stream"), nb::arg("num_threads") = 0,
        "Runs flashbuf::decode with a plan tuple from plan_decode; returns the backend that ran.");
  m.def("merge_states", &merge_states, nb::arg("o_parts"), nb::arg("lse_parts"), nb::arg("out"),
        nb::arg("lse").none(), nb::arg("stream"),
        "Runs flashbuf::merge_states into preallocated out (and lse); returns the backend that ran.");
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
  m.attr("PLAN_WORKSPACE_BYTES_INDEX") = std::tuple_size_v<PlanTuple> - 1;
}
