#!/bin/bash
# Whether two source trees compile to the same device code, without cuobjdump (which this
# machine lacks; scripts/compare_sass.sh compares SASS where it is present): the PTX of every
# prefill and decode instantiation (CMakeLists.txt's lists), for sm_90a and sm_80, compared
# byte for byte. Identical PTX means identical SASS: ptxas is deterministic for one input and
# one set of flags. For refactorings that must not change a kernel.
#
#   scripts/compare_ptx.sh TREE_BEFORE TREE_AFTER     e.g. a `git worktree add /tmp/base HEAD`
#
# Exit 0: identical. Two cores take about four minutes per tree.
set -euo pipefail
if [ $# -ne 2 ]; then echo "usage: $0 TREE_BEFORE TREE_AFTER" >&2; exit 2; fi
here=$(cd "$(dirname "$0")/.." && pwd)
list() { sed -n "/^set($1\$/,/)/p; /^set($1 \"/p" "$here/CMakeLists.txt" | grep -oE '(bf16|fp16)_[0-9_]+' | sort -u; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ptx() {  # tree, output folder: one .ptx per instantiation and architecture
  mkdir -p "$2"
  for inst in $(list FLASHBUF_ALL_INSTANTIATIONS); do
    IFS=_ read -r dt d dv <<< "$inst"
    printf '#include "cuda/prefill_launch.cuh"\nnamespace flashbuf::detail {\nFLASHBUF_INSTANTIATE_PREFILL(%s, %s, %s)\n}\n' \
      "$dt" "$d" "$dv" > "$2/prefill_$inst.cu"
  done
  for inst in $(list FLASHBUF_DECODE_INSTANTIATIONS); do
    IFS=_ read -r dt d <<< "$inst"
    printf '#include "cuda/decode_launch.cuh"\nnamespace flashbuf::kernels::decode {\nFLASHBUF_DECODE_INSTANTIATE(%s, %s)\n}\n' \
      "$dt" "$d" > "$2/decode_$inst.cu"
  done
  for cu in "$2"/*.cu; do
    for arch in 90a 80; do
      nvcc -DFLASHBUF_WITH_CUDA=1 -I"$1/include" -I"$1/src" -O3 -DNDEBUG -arch=sm_$arch --expt-relaxed-constexpr \
        -std=c++20 -ptx "$cu" -o "${cu%.cu}.sm$arch.ptx"
    done
  done
}
ptx "$1" "$work/a" & ptx "$2" "$work/b" & wait
n=$(ls "$work"/a/*.ptx | wc -l)
if diff -rq --exclude='*.cu' "$work/a" "$work/b"; then
  echo "PTX identical: $n files (prefill and decode instantiations, sm_90a and sm_80)"
else
  echo "PTX differs"; exit 1
fi
