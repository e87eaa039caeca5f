// Decode kernels for bf16, head dim 128 (every MTiles shape): the only unit that compiles
// them; src/cuda/decode.cu sees them through FLASHBUF_DECODE_EXTERN.
#include "flashbuf/kernels/decode_kernel.cuh"

namespace flashbuf::kernels::decode {
FLASHBUF_DECODE_INSTANTIATE(__nv_bfloat16, 128)
}  // namespace flashbuf::kernels::decode
