// Reference/test utilities for GPU tests (built only with CUDA): DeviceMirror, a device copy
// of a HostTensor's storage with guard bytes on both sides, and DeviceProblem, the mirrors of
// every tensor of an AttentionTensors, bound to API arguments through TensorPointers.
//
//   [ guard: kGuard bytes of kGuardByte | the HostTensor's storage, padding included | guard ]
//
// The storage keeps the host tensor's strides, so a view of the host tensor rebinds to the
// device pointer unchanged (spec.hpp's bind). Outputs keep their host poison on the device, so
// an element a kernel never writes comes back poisoned; guards_intact() says whether anything
// wrote next to the tensor.
#pragma once

#include <cstddef>
#include <string>

#include "reference/spec.hpp"

namespace flashbuf::reference {

class DeviceMirror {
 public:
  static constexpr std::size_t kGuard = 256;
  static constexpr unsigned char kGuardByte = 0x5A;

  explicit DeviceMirror(const HostTensor& t);
  ~DeviceMirror();
  DeviceMirror(const DeviceMirror&) = delete;
  DeviceMirror& operator=(const DeviceMirror&) = delete;

  void* data() const;                    // null for an absent tensor
  std::size_t bytes() const { return bytes_; }
  void upload(const HostTensor& t) const;    // host storage -> device (guards untouched)
  void download(HostTensor& t) const;        // device storage -> host
  bool guards_intact() const;

 private:
  std::size_t bytes_;
  void* raw_ = nullptr;
};

struct DeviceProblem {
  DeviceMirror q, k, v, o, lse, cu_q, cu_k, seqlens_k, page_table;
  explicit DeviceProblem(const AttentionTensors& t);
  TensorPointers pointers() const;
  // Downloads o and lse (when present) into t.
  void download_outputs(AttentionTensors& t) const;
  // Names of the tensors whose guards were overwritten, space-separated ("" if none).
  std::string guard_violations() const;
};

}  // namespace flashbuf::reference
