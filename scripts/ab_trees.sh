#!/usr/bin/env bash
# Here, before an A/B on the GPU machine: one source tree per git revision under .ab/ (ignored),
# each a `git archive` of the revision without bench/results, with its .commit file, named by
# the revision ("base" for the first when -b is given), ready to carry as ".ab" to
# scripts/gpu_ab.sh or scripts/gpu/regression_ab.sh.
#
#   scripts/ab_trees.sh main decode-softmax nan-tree     # .ab/main .ab/decode-softmax .ab/nan-tree
#   scripts/ab_trees.sh -b 6004d62                        # .ab/base, regression_ab.sh's base
#
# Replaces .ab/ as a whole: what is carried is exactly the trees named.
set -euo pipefail
cd "$(dirname "$0")/.."
base=0
if [ "${1:-}" = "-b" ]; then base=1; shift; fi
[ $# -ge 1 ] || { echo "usage: scripts/ab_trees.sh [-b] REV..." >&2; exit 2; }
rm -rf .ab
for rev in "$@"; do
  name=${rev//\//-}
  if [ "$base" = 1 ]; then name=base; base=0; fi
  mkdir -p ".ab/$name"
  git archive "$rev" -- . ':!bench/results' | tar -x -C ".ab/$name"
  git rev-parse --short "$rev" >".ab/$name/.commit"
  echo ".ab/$name: $(cat ".ab/$name/.commit")"
done
du -sh .ab
