#!/bin/bash
# Where a kernel's spills sit, on the GPU machine (it has cuobjdump): the SASS of
# prefill_sm80_kernel<bf16, 64, 64> for sm_90a from this tree and a base tree (.ab/base, a
# `git archive` carried as .ab), with each tree's local-memory accesses (STL/LDL) and branches
# listed by line, so a spill can be placed inside or outside the main loop. One device call;
# the SASS files land in $OUT (bench/NOTES-prefill.md, 2026-12-02, read them).
set -u
for t in .ab/base .; do
  n=$( [ "$t" = . ] && echo main || echo base )
  printf '#include "cuda/prefill_launch.cuh"\nnamespace flashbuf::detail {\nFLASHBUF_INSTANTIATE_PREFILL(bf16, 64, 64)\n}\n' > /tmp/tu-$n.cu
  ( nvcc -DFLASHBUF_WITH_CUDA=1 -I$t/include -I$t/src -O3 -DNDEBUG -gencode arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -std=c++20 -lineinfo -c /tmp/tu-$n.cu -o /tmp/tu-$n.o -Xptxas -v > /tmp/ptxas-$n.log 2>&1
    cuobjdump -sass -fun '_ZN8flashbuf19prefill_sm80_kernelI13__nv_bfloat16Li64ELi64ELb0ENS_9TileShapeILi128ELi128ELi4ELi2ELb0EEEEEvNS_13PrefillParamsE' /tmp/tu-$n.o > $OUT/sass-$n.txt 2>&1 ) &
done
wait
for n in base main; do echo "== $n: $(grep -c . $OUT/sass-$n.txt) lines, STL $(grep -c 'STL' $OUT/sass-$n.txt), LDL $(grep -c 'LDL' $OUT/sass-$n.txt), BRA $(grep -c 'BRA' $OUT/sass-$n.txt)"; grep -n "STL\|LDL\|BRA\|HMMA" $OUT/sass-$n.txt | awk -F: '{print $1": "$2}' | sed -E 's/ +/ /g' | grep -v HMMA | head -60; done
