// kernels: the hooks of the per-block timelines that bench/trace_prefill.cu and
// bench/trace_decode.cu record. Where a unit defines FLASHBUF_BLOCK_TRACE (and, before including
// a kernel, the hooks that kernel calls), FLASHBUF_TRACE_STEP(cond, hook) calls the hook on the
// threads where cond holds; in every other build it is nothing, so the library's code is the
// same with or without these lines.
#pragma once

#ifdef FLASHBUF_BLOCK_TRACE
#define FLASHBUF_TRACE_STEP(cond, hook) \
  if (cond) hook
#else
#define FLASHBUF_TRACE_STEP(cond, hook)
#endif
