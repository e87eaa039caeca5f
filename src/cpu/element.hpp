// CPU backend: element types of the tensors it reads and writes. bf16 and fp16 are stored as
// uint16_t and converted with the core layer's bit-exact conversions; fp32 is used as is.
// Every computation on the CPU happens in fp32 after `load` and is rounded once by `store`.
#pragma once

#include <cstdint>

#include "flashbuf/core/numeric.hpp"
#include "flashbuf/flashbuf.hpp"

namespace flashbuf::detail::cpu {

struct Bf16 {
  using Storage = std::uint16_t;
  static float load(Storage x) { return bf16_to_float(x); }
  static Storage store(float x) { return float_to_bf16(x); }
};

struct Fp16 {
  using Storage = std::uint16_t;
  static float load(Storage x) { return fp16_to_float(x); }
  static Storage store(float x) { return float_to_fp16(x); }
};

struct Fp32 {
  using Storage = float;
  static float load(Storage x) { return x; }
  static Storage store(float x) { return x; }
};

// Calls f(Element{}) with the element type of `dtype` (bf16, fp16 or fp32; validation has
// ruled out everything else).
template <class F>
decltype(auto) with_element(DType dtype, F&& f) {
  switch (dtype) {
    case DType::bf16: return f(Bf16{});
    case DType::fp16: return f(Fp16{});
    default: return f(Fp32{});
  }
}

}  // namespace flashbuf::detail::cpu
