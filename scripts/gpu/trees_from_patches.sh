#!/usr/bin/env bash
# On the GPU machine, from the repository root: the A/B trees that `scripts/ab_trees.sh -p` wrote as
# patches, each /root/ab/<name>, a copy of the carried working tree with .abp/<name>.patch
# applied ("base": none) and its .commit; then scripts/gpu_ab.sh /root/ab/base /root/ab/NAME ...
# A tree already there is kept (a warm machine's second call).
#
#   bash scripts/gpu/trees_from_patches.sh base lazy-exact d128-block3-bn64
set -euo pipefail
cd "$(dirname "$0")/../.."
for name in "$@"; do
  dst=/root/ab/$name
  if [ -d "$dst" ]; then echo "$dst kept"; continue; fi
  mkdir -p "$dst"
  tar -C . --exclude=./.deps --exclude=./.fa4site --exclude='./.ab*' --exclude='./build*' \
      --exclude=./bench/results -cf - . | tar -C "$dst" -xf -
  if [ "$name" != base ]; then (cd "$dst" && patch -p1 -s <"$OLDPWD/.abp/$name.patch"); fi
  cp ".abp/$name.commit" "$dst/.commit"
  echo "$dst: $(cat "$dst/.commit")"
done
