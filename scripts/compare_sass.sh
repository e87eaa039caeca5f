#!/bin/bash
# Whether two builds hold the same device code: the SASS of every kernel in every CUDA object of
# the flashbuf library, with instruction addresses, encodings and source paths stripped, compared
# object by object. For refactorings that must not change a kernel (no GPU needed).
#
#   scripts/compare_sass.sh BUILD_BEFORE BUILD_AFTER
#
# Both builds configured alike, e.g. -DFLASHBUF_INSTANTIATIONS="bf16_128_128;fp16_64_64"
# -DFLASHBUF_DECODE_INSTANTIATIONS="bf16_128;fp16_64" -DFLASHBUF_CUDA_ARCHS="90a;80".
# Needs cuobjdump on PATH (the CUDA toolkit's, or the one Triton ships). Exit 0: identical.
set -euo pipefail
if [ $# -ne 2 ]; then echo "usage: $0 BUILD_BEFORE BUILD_AFTER" >&2; exit 2; fi
command -v cuobjdump > /dev/null || { echo "cuobjdump not on PATH" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dump() {  # build dir -> one stripped SASS file per object under $2
  mkdir -p "$2"
  (cd "$1/CMakeFiles/flashbuf.dir" && find . -name '*.cu.o' | sort) | while read -r f; do
    cuobjdump -sass "$1/CMakeFiles/flashbuf.dir/$f" | grep -v '^identifier = ' |
      sed -E 's|/\*[0-9a-f]{4,}\*/||; s|/\* 0x[0-9a-f]+ \*/||; s|[[:space:]]+$||' |
      grep -v '^[[:space:]]*$' > "$2/$(echo "${f#./}" | tr / _).sass"
  done
}
dump "$1" "$work/a"
dump "$2" "$work/b"
count() { cat "$1"/*.sass | grep -c "$2" || true; }
echo "objects $(ls "$work/a" | wc -l) / $(ls "$work/b" | wc -l), kernel functions (all archs)" \
     "$(count "$work/a" 'Function :') / $(count "$work/b" 'Function :'), SASS lines" \
     "$(cat "$work/a"/*.sass | wc -l) / $(cat "$work/b"/*.sass | wc -l)"
if diff -r "$work/a" "$work/b" > "$work/diff"; then
  echo "SASS identical"
else
  echo "SASS differs ($(wc -l < "$work/diff") diff lines):"; head -40 "$work/diff"; exit 1
fi
