// Reference/test utilities: HostTensor (see host_tensor.hpp).
#include "reference/host_tensor.hpp"

#include <cstring>
#include <stdexcept>

#include "flashbuf/core/numeric.hpp"

namespace flashbuf::reference {
namespace {

// NaNs with a payload no arithmetic produces, so "still poison" is unambiguous.
constexpr std::uint16_t kPoisonBf16 = 0x7FA5;
constexpr std::uint16_t kPoisonFp16 = 0x7DA5;
constexpr std::uint32_t kPoisonFp32 = 0x7FA5A5A5u;
constexpr std::uint32_t kPoisonInt32 = 0x5EADBEEFu;

}  // namespace

HostTensor::HostTensor(DType dtype, std::vector<std::int64_t> shape, std::int64_t pad)
    : dtype_(dtype), shape_(std::move(shape)), pad_(pad) {
  if (shape_.empty() || shape_.size() > static_cast<std::size_t>(kMaxRank)) {
    throw std::invalid_argument("HostTensor: rank must be 1..4");
  }
  strides_.assign(shape_.size(), 1);
  std::int64_t stride = shape_.back() + pad_;
  for (int i = rank() - 2; i >= 0; --i) {
    strides_[i] = stride;
    stride *= shape_[i];
  }
  const std::size_t bytes = 2 * kGuardBytes + storage_bytes();
  storage_.assign((bytes + 7) / 8, 0);
  std::memset(base(), kGuardByte, storage_.size() * 8);
  poison();
}

std::int64_t HostTensor::numel() const {
  std::int64_t n = 1;
  for (auto e : shape_) n *= e;
  return shape_.empty() ? 0 : n;
}

std::int64_t HostTensor::storage_elements() const {
  if (shape_.empty()) return 0;
  std::int64_t rows = 1;
  for (int i = 0; i + 1 < rank(); ++i) rows *= shape_[i];
  return rows * (shape_.back() + pad_);
}

void* HostTensor::data() { return base() + kGuardBytes; }
const void* HostTensor::data() const { return base() + kGuardBytes; }

std::int64_t HostTensor::offset(std::initializer_list<std::int64_t> index) const {
  std::int64_t off = 0;
  int i = 0;
  for (auto x : index) off += x * strides_[i++];
  return off;
}

std::int64_t HostTensor::logical_to_storage(std::int64_t i) const {
  const std::int64_t last = shape_.back();
  return (i / last) * (last + pad_) + i % last;
}

std::uint64_t HostTensor::bits_at(std::int64_t off) const {
  const std::uint8_t* p = static_cast<const std::uint8_t*>(data()) + off * dtype_size(dtype_);
  if (dtype_size(dtype_) == 2) {
    std::uint16_t x;
    std::memcpy(&x, p, 2);
    return x;
  }
  std::uint32_t x;
  std::memcpy(&x, p, 4);
  return x;
}

double HostTensor::get(std::int64_t off) const {
  const auto bits = bits_at(off);
  switch (dtype_) {
    case DType::bf16: return bf16_to_float(static_cast<std::uint16_t>(bits));
    case DType::fp16: return fp16_to_float(static_cast<std::uint16_t>(bits));
    case DType::fp32: return float_from_bits(static_cast<std::uint32_t>(bits));
    case DType::int32: return static_cast<std::int32_t>(static_cast<std::uint32_t>(bits));
  }
  return 0.0;
}

void HostTensor::set(std::int64_t off, double value) {
  std::uint8_t* p = static_cast<std::uint8_t*>(data()) + off * dtype_size(dtype_);
  switch (dtype_) {
    case DType::bf16: {
      const std::uint16_t x = float_to_bf16(static_cast<float>(value));
      std::memcpy(p, &x, 2);
      break;
    }
    case DType::fp16: {
      const std::uint16_t x = float_to_fp16(static_cast<float>(value));
      std::memcpy(p, &x, 2);
      break;
    }
    case DType::fp32: {
      const float x = static_cast<float>(value);
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::int32: {
      const std::int32_t x = static_cast<std::int32_t>(value);
      std::memcpy(p, &x, 4);
      break;
    }
  }
}

std::uint64_t HostTensor::poison_bits() const {
  switch (dtype_) {
    case DType::bf16: return kPoisonBf16;
    case DType::fp16: return kPoisonFp16;
    case DType::fp32: return kPoisonFp32;
    case DType::int32: return kPoisonInt32;
  }
  return 0;
}

void HostTensor::poison() {
  const std::uint64_t bits = poison_bits();
  std::uint8_t* p = static_cast<std::uint8_t*>(data());
  const std::size_t size = dtype_size(dtype_);
  for (std::int64_t i = 0; i < storage_elements(); ++i) std::memcpy(p + i * size, &bits, size);
}

void HostTensor::fill_normal(Rng& rng, double stddev) {
  for (std::int64_t i = 0; i < numel(); ++i) set(logical_to_storage(i), rng.normal(0.0, stddev));
}

void HostTensor::fill(double value) {
  for (std::int64_t i = 0; i < numel(); ++i) set(logical_to_storage(i), value);
}

bool HostTensor::check_guards(std::string* what) const {
  const std::uint8_t* front = base();
  const std::uint8_t* back = static_cast<const std::uint8_t*>(data()) + storage_bytes();
  const std::uint8_t* end = base() + storage_.size() * 8;
  for (const std::uint8_t* p = front; p < front + kGuardBytes; ++p) {
    if (*p != kGuardByte) {
      if (what) *what = "front guard byte " + std::to_string(p - front) + " overwritten";
      return false;
    }
  }
  for (const std::uint8_t* p = back; p < end; ++p) {
    if (*p != kGuardByte) {
      if (what) *what = "back guard byte " + std::to_string(p - back) + " overwritten";
      return false;
    }
  }
  if (pad_ > 0) {
    const std::int64_t row = shape_.back() + pad_;
    for (std::int64_t off = 0; off < storage_elements(); ++off) {
      if (off % row >= shape_.back() && bits_at(off) != poison_bits()) {
        if (what) *what = "padding element at storage offset " + std::to_string(off) + " overwritten";
        return false;
      }
    }
  }
  return true;
}

bool HostTensor::fully_written() const {
  for (std::int64_t i = 0; i < numel(); ++i) {
    if (bits_at(logical_to_storage(i)) == poison_bits()) return false;
  }
  return true;
}

TensorView HostTensor::view(DeviceKind device, void* ptr, int device_index) {
  TensorView v;
  if (shape_.empty()) return v;  // absent
  v.data = ptr ? ptr : data();
  v.dtype = dtype_;
  v.rank = rank();
  for (int i = 0; i < rank(); ++i) {
    v.shape[i] = shape_[i];
    v.stride[i] = strides_[i];
  }
  v.device = device;
  v.device_index = device_index;
  return v;
}

}  // namespace flashbuf::reference
