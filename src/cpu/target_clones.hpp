// CPU backend: FLASHBUF_CPU_CLONES marks an entry point that GCC compiles for several
// instruction sets (AVX-512, AVX2 + FMA, baseline); the loader picks the best this CPU has, so
// the distributed build needs no -march. Elsewhere (Clang, other architectures) it is empty
// and the function is built once for the baseline.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FLASHBUF_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FLASHBUF_CPU_CLONES
#endif
