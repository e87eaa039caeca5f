#!/usr/bin/env bash
# Sourced on the GPU machine by scripts that run flashbuf's Python package from outside the
# checkout (records.sh, ncu_tile.sh): `commit_package DIR LOG` installs this tree into DIR
# (pip --target, sm_90a, the instantiations in FLASHBUF_PACKAGE_CMAKE_ARGS) unless DIR already
# holds the package of this commit (FLASHBUF_COMMIT, else .commit), so later calls on a warm
# machine reuse it. Returns 1 (the log's tail printed) when the build fails.
FLASHBUF_PACKAGE_CMAKE_ARGS=${FLASHBUF_PACKAGE_CMAKE_ARGS:--DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128;bf16_192_128;bf16_256_256 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128}
commit_package() {
  local dir=$1 log=$2 commit start
  commit=${FLASHBUF_COMMIT:-$(cat .commit 2>/dev/null || echo unknown)}
  if [ -f "$dir/.built" ] && [ "$(cat "$dir/.built")" = "$commit" ]; then return 0; fi
  start=$(date +%s)
  rm -rf "$dir"
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) CMAKE_ARGS="-DFLASHBUF_CUDA_ARCHS=90a $FLASHBUF_PACKAGE_CMAKE_ARGS" \
    python3 -m pip install --no-build-isolation --no-deps --target "$dir" . >"$log" 2>&1 ||
    { tail -30 "$log"; return 1; }
  echo "$commit" >"$dir/.built"
  echo "package of $commit built in $(( $(date +%s) - start )) s ($dir)" >&2
}
