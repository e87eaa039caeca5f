// arch/sm90: setmaxnreg — moves registers between the warpgroups of a block at run time
// (sm_90a). A warp-specialised kernel launches with an even share per thread, then the
// producer warpgroup gives most of its registers back and the consumers take them. Every warp
// of a warpgroup must execute the same instruction; counts are multiples of 8 in [24, 256].
#pragma once

#include "flashbuf/arch/sm90/target.cuh"

namespace flashbuf::sm90 {

template <int Registers>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(Registers % 8 == 0 && Registers >= 24 && Registers <= 256, "setmaxnreg: 24..256, step 8");
#ifndef FLASHBUF_NO_WGMMA
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Registers));
#endif
}

template <int Registers>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(Registers % 8 == 0 && Registers >= 24 && Registers <= 256, "setmaxnreg: 24..256, step 8");
#ifndef FLASHBUF_NO_WGMMA
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Registers));
#endif
}

}  // namespace flashbuf::sm90
