#!/usr/bin/env bash
# Here, before an A/B on the GPU machine, when whole trees (scripts/ab_trees.sh, ~2.6 MB each)
# would not fit the carry beside FlashAttention-4's stash: each revision as a patch against the
# working tree's HEAD's history, in .abp/ (ignored): .abp/<name>.patch (the diff from its merge
# base with HEAD) and .abp/<name>.commit, and .abp/base.commit for HEAD itself. There,
# scripts/gpu/trees_from_patches.sh rebuilds the trees from the carried working tree.
#
#   scripts/ab_patches.sh lazy-exact d128-block3-bn64     # carry [".abp", ...]
#
# A revision's patch carries only its own changes: the working tree must be HEAD's (clean), and
# the patch must apply to it (it does where HEAD's later commits touch other files).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: scripts/ab_patches.sh REV..." >&2; exit 2; }
[ -z "$(git status --porcelain --untracked-files=no)" ] || { echo "ab_patches: the working tree has changes" >&2; exit 2; }
rm -rf .abp && mkdir .abp
git rev-parse --short HEAD >.abp/base.commit
for rev in "$@"; do
  name=${rev//\//-}
  git diff "$(git merge-base HEAD "$rev")" "$rev" >".abp/$name.patch"
  git rev-parse --short "$rev" >".abp/$name.commit"
  echo ".abp/$name.patch: $(grep -c '^diff --git' ".abp/$name.patch") files, $(cat ".abp/$name.commit")"
done
