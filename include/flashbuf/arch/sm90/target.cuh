// arch/sm90: which device pass is compiling. wgmma and setmaxnreg exist only on sm_90a; in the
// device pass of any other target the Hopper kernels compile to a trap (the launcher never
// picks them there), so one translation unit can build for "90a;80".
#pragma once

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FLASHBUF_NO_WGMMA 1
#endif
