// arch/sm80: single special-function-unit instructions the softmax uses on its hot path and
// in its epilogue, and the one compare its epilogue's NaN rule uses.
#pragma once

namespace flashbuf::sm80 {

// ex2.approx.ftz.f32: 2^x in one MUFU.EX2 (relative error ~2^-22; subnormal results flush
// to zero, which the softmax never needs: they are < 2^-126 of the row maximum).
// exp2f without fast-math wraps the same instruction in range fix-ups.
__device__ __forceinline__ float ex2_approx_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// rcp.approx.ftz.f32: 1 / x in one MUFU.RCP (at most 1 ulp off; 1.0f / x is the correctly
// rounded division: MUFU.RCP, a Newton step and a branch to a slow path for extreme
// exponents). Subnormal arguments and results flush to zero; +-inf gives +-0, NaN gives NaN.
__device__ __forceinline__ float rcp_approx_ftz(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// lg2.approx.ftz.f32: log2(x) in one MUFU.LG2, the instruction __log2f uses, without the
// rescaling of subnormal arguments around it (they flush to zero: log2 gives -inf).
__device__ __forceinline__ float lg2_approx_ftz(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// setp.nan.f32: whether a or b is NaN, one FSETP for the pair (isnan(a) | isnan(b) took one
// compare each).
__device__ __forceinline__ bool either_nan(float a, float b) {
  unsigned r;
  asm("{\n\t.reg .pred p;\n\tsetp.nan.f32 p, %1, %2;\n\tselp.u32 %0, 1, 0, p;\n\t}" : "=r"(r) : "f"(a), "f"(b));
  return r != 0;
}

}  // namespace flashbuf::sm80
