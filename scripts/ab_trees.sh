#!/usr/bin/env bash
# Here, before an A/B on the GPU machine: one source tree per git revision under .ab/ (ignored),
# each a `git archive` of the revision without bench/results, with its .commit file, named by
# the revision ("base" for the first when -b is given), ready to carry as ".ab" to
# scripts/gpu_ab.sh or scripts/gpu/regression_ab.sh.
#
#   scripts/ab_trees.sh main decode-softmax nan-tree     # .ab/main .ab/decode-softmax .ab/nan-tree
#   scripts/ab_trees.sh -b 6004d62                        # .ab/base, regression_ab.sh's base
#
# -p: patches instead, where whole trees (~2.6 MB each) would not fit the carry beside
# FlashAttention-4's stash: .abp/<name>.patch (the revision's diff from its merge base with HEAD)
# and .commit, and .abp/base.commit for HEAD, which must be the (clean) working tree that
# travels; there, scripts/gpu/trees_from_patches.sh rebuilds /root/ab/base and /root/ab/<name>.
#
#   scripts/ab_trees.sh -p lazy-exact d128-block3-bn64   # carry [".abp", ...]
#
# Replaces .ab/ (.abp/) as a whole: what is carried is exactly the revisions named.
set -euo pipefail
cd "$(dirname "$0")/.."
base=0 patches=0
case "${1:-}" in
  -b) base=1; shift ;;
  -p) patches=1; shift ;;
esac
[ $# -ge 1 ] || { echo "usage: scripts/ab_trees.sh [-b | -p] REV..." >&2; exit 2; }
out=.ab
if [ "$patches" = 1 ]; then
  [ -z "$(git status --porcelain --untracked-files=no)" ] || { echo "ab_trees -p: the working tree has changes" >&2; exit 2; }
  out=.abp
fi
rm -rf "$out" && mkdir "$out"
if [ "$patches" = 1 ]; then git rev-parse --short HEAD >"$out/base.commit"; fi
for rev in "$@"; do
  name=${rev//\//-}
  if [ "$base" = 1 ]; then name=base; base=0; fi
  if [ "$patches" = 1 ]; then
    git diff "$(git merge-base HEAD "$rev")" "$rev" >"$out/$name.patch"
    git rev-parse --short "$rev" >"$out/$name.commit"
    echo "$out/$name.patch: $(grep -c '^diff --git' "$out/$name.patch") files, $(cat "$out/$name.commit")"
  else
    mkdir -p "$out/$name"
    git archive "$rev" -- . ':!bench/results' | tar -x -C "$out/$name"
    git rev-parse --short "$rev" >"$out/$name/.commit"
    echo "$out/$name: $(cat "$out/$name/.commit")"
  fi
done
du -sh "$out"
