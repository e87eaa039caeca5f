// Reference/test utilities: HostTensor, an owning host tensor for tests and the CLI.
//
//   [ front guard | row 0: extent elements, pad elements | row 1 ... | back guard ]
//
// Guards (kGuardBytes each side, a fixed byte pattern) catch writes before or after the
// data; `pad` extra elements after every last-dim row make the views non-contiguous (row
// stride = last extent + pad) and catch writes and reads between rows. New storage, padding
// included, holds a poison value (a NaN with a recognisable payload for floats), so an output
// a kernel forgot to write, or a padding element it read, shows up. Data starts 64 bytes into
// a 16-byte-aligned allocation: 16-byte aligned, as the GPU paths need.
//
// GPU tests copy `storage_bytes()` from `data()` to the device and bind the device pointer
// with `view(DeviceKind::cuda, device_ptr)`: the strides are the same on both sides.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "flashbuf/flashbuf.hpp"
#include "reference/random.hpp"

namespace flashbuf::reference {

class HostTensor {
 public:
  static constexpr std::size_t kGuardBytes = 64;
  static constexpr std::uint8_t kGuardByte = 0xA5;

  HostTensor() = default;
  HostTensor(DType dtype, std::vector<std::int64_t> shape, std::int64_t pad = 0);

  bool empty() const { return shape_.empty(); }
  DType dtype() const { return dtype_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  const std::vector<std::int64_t>& strides() const { return strides_; }
  std::int64_t numel() const;            // logical elements
  std::int64_t storage_elements() const; // padding included
  std::size_t storage_bytes() const { return static_cast<std::size_t>(storage_elements()) * dtype_size(dtype_); }

  void* data();
  const void* data() const;

  // Storage offset of a logical multi-index; values as double (bf16/fp16 converted exactly).
  std::int64_t offset(std::initializer_list<std::int64_t> index) const;
  double get(std::int64_t storage_offset) const;
  void set(std::int64_t storage_offset, double value);  // rounds to the dtype (nearest even)
  double at(std::initializer_list<std::int64_t> index) const { return get(offset(index)); }
  // The i-th logical element in row-major order.
  std::int64_t logical_to_storage(std::int64_t i) const;

  std::int32_t* i32() { return static_cast<std::int32_t*>(data()); }
  const std::int32_t* i32() const { return static_cast<const std::int32_t*>(data()); }

  void fill_normal(Rng& rng, double stddev = 1.0);
  void fill(double value);
  void poison();  // every storage element (padding included) := the poison value

  // Front and back guards hold their pattern and every padding element still holds poison.
  // On failure `what` (if given) says where.
  bool check_guards(std::string* what = nullptr) const;
  // Every logical element differs from the poison bits (an output was written everywhere).
  bool fully_written() const;

  // A view of this tensor's layout over `data` (default: this host storage).
  TensorView view(DeviceKind device = DeviceKind::cpu, void* data = nullptr, int device_index = 0);

 private:
  std::uint64_t poison_bits() const;
  std::uint64_t bits_at(std::int64_t storage_offset) const;
  std::uint8_t* base() { return reinterpret_cast<std::uint8_t*>(storage_.data()); }
  const std::uint8_t* base() const { return reinterpret_cast<const std::uint8_t*>(storage_.data()); }

  DType dtype_ = DType::fp32;
  std::vector<std::int64_t> shape_, strides_;
  std::int64_t pad_ = 0;
  std::vector<std::uint64_t> storage_;  // uint64_t: 16-byte aligned by operator new on x86-64/ARM64
};

}  // namespace flashbuf::reference
