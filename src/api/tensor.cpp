// API layer: the small pieces of the public header that are not entry points — dtype and
// backend names, TensorView helpers, make_view and build_info. Host C++ only.
#include <string>

#include "flashbuf/flashbuf.hpp"

namespace flashbuf {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::bf16: return "bf16";
    case DType::fp16: return "fp16";
    case DType::fp32: return "fp32";
    case DType::int32: return "int32";
  }
  return "unknown dtype";
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::bf16:
    case DType::fp16: return 2;
    case DType::fp32:
    case DType::int32: return 4;
  }
  return 0;
}

const char* backend_name(Backend backend) {
  switch (backend) {
    case Backend::automatic: return "automatic";
    case Backend::cpu: return "cpu";
    case Backend::sm80: return "sm80";
    case Backend::sm90: return "sm90";
  }
  return "unknown backend";
}

std::int64_t TensorView::numel() const {
  if (rank <= 0) return 0;
  std::int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[i];
  return n;
}

// Row-major contiguity. Dimensions of extent 1 may carry any stride (they are never stepped
// over), as in PyTorch, so a view sliced to one head still counts as contiguous.
bool TensorView::is_contiguous() const {
  std::int64_t expected = 1;
  for (int i = rank - 1; i >= 0; --i) {
    if (shape[i] != 1 && stride[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

TensorView make_view(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                     DeviceKind device, int device_index) {
  if (shape.size() == 0 || shape.size() > static_cast<std::size_t>(kMaxRank)) {
    throw ArgumentError("shape", "expected rank 1.." + std::to_string(kMaxRank) + ", got rank " +
                                     std::to_string(shape.size()));
  }
  TensorView view;
  view.data = data;
  view.dtype = dtype;
  view.rank = static_cast<int>(shape.size());
  view.device = device;
  view.device_index = device_index;
  int i = 0;
  for (std::int64_t extent : shape) {
    if (extent < 0) {
      throw ArgumentError("shape", "extent " + std::to_string(i) + " is negative (" +
                                       std::to_string(extent) + ")");
    }
    view.shape[i++] = extent;
  }
  std::int64_t stride = 1;
  for (i = view.rank - 1; i >= 0; --i) {
    view.stride[i] = stride;
    stride *= view.shape[i];
  }
  return view;
}

std::string build_info() {
  // std::string, not a stream: no dependence on the process's global C++ locale.
  const std::string archs = FLASHBUF_BUILD_ARCHS;
  std::string out = std::string("flashbuf ") + FLASHBUF_VERSION_STRING + "\n";
  out += "  CPU backend: bf16, fp16, fp32; any head dims; every mask, paged and varlen\n";
  if (archs == "none" || archs.empty()) {
    out += std::string("  CUDA: not built (") + FLASHBUF_NO_CUDA_REASON + "); CUDA tensors are refused\n";
  } else {
    out += "  CUDA architectures: " + archs + "\n";
    out += std::string("  prefill instantiations (dtype_D_Dv): ") + FLASHBUF_BUILD_INSTANTIATIONS + "\n";
    out += std::string("  decode instantiations (dtype_D): ") + FLASHBUF_BUILD_DECODE_INSTANTIATIONS + "\n";
  }
  return out;
}

}  // namespace flashbuf
