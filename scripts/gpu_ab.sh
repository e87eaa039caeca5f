#!/usr/bin/env bash
# A/B of source trees in ONE device call: the same benchmark, on the same GPU, for each tree
# (e.g. main and a branch, exported by `scripts/ab_trees.sh REV...` into .ab/<name> and carried
# to the device machine). Each tree's Python package builds into its own folder (in parallel,
# sharing the cores), then this tree's bench/bench.py (one harness for all) runs against each
# tree's package; the anchors run with the first tree only (the others get --anchors none, and
# their cuDNN ratios use the first tree's cuDNN times). Results go to $OUT/<name>.json, logs
# (and the plots) into $OUT/ab-logs.tgz, a table of the ratios of every tree to the first is printed last.
#   scripts/gpu_ab.sh .ab/main .ab/persistent -- --prefill --backend sm90 --target-ms 10
# GPU_TESTS="<gtest filter>" also builds and runs each tree's GPU tests (its own CMake build,
# TEST_SHARDS processes, default 8), before any benchmark; AB_SKIP_BUILD=1 reuses packages that
# an earlier run in the same call built (a second benchmark over the same trees, another $OUT);
# AB_TEST_TREES="name ..." builds and runs the tests of the trees named only (e.g. the
# branches; main is measured, not re-verified); AB_CMAKE_ARGS adds CMake options (e.g. -DFLASHBUF_INSTANTIATIONS=bf16_128_128), to the test
# builds too unless AB_TEST_CMAKE_ARGS is set (to "" for every instantiation); a file
# <tree>/.commit (git rev-parse --short) names the commit in that tree's results.
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
OUT=${OUT:-$here/gpu-out}
mkdir -p "$OUT"
trees=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do trees+=("$(cd "$1" && pwd)"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#trees[@]} -ge 1 ] || { echo "usage: scripts/gpu_ab.sh TREE... -- BENCH_ARGS" >&2; exit 2; }
jobs_each=$(( $(nproc) / ${#trees[@]} )); [ "$jobs_each" -ge 1 ] || jobs_each=1
tested() {  # $1 tree: are its GPU tests built and run?
  [ -n "${GPU_TESTS:-}" ] || return 1
  [ -z "${AB_TEST_TREES:-}" ] || [[ " $AB_TEST_TREES " == *" $(basename "$1") "* ]]
}

build_tests() {  # $1 tree, $2 build jobs
  cmake -S "$1" -B "$1/build-ab" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHBUF_ENABLE_CUDA=ON \
    -DFLASHBUF_CUDA_ARCHS="${FLASHBUF_CUDA_ARCHS:-90a}" -DFLASHBUF_BUILD_PYTHON=OFF ${AB_TEST_CMAKE_ARGS-${AB_CMAKE_ARGS:-}} >/dev/null &&
  cmake --build "$1/build-ab" -j"$2" --target flashbuf_gpu_tests
}
for t in "${trees[@]}"; do  # packages (and test binaries) build side by side, sharing the cores
  name=$(basename "$t")
  if [ -z "${AB_SKIP_BUILD:-}" ] || [ ! -d "/tmp/ab-pkg-$name" ]; then
    rm -rf "/tmp/ab-pkg-$name"  # pip --target leaves an existing folder's package in place
    (cd "$t" && CMAKE_BUILD_PARALLEL_LEVEL=$jobs_each CMAKE_ARGS="-DFLASHBUF_CUDA_ARCHS=${FLASHBUF_CUDA_ARCHS:-90a} ${AB_CMAKE_ARGS:-}" \
       python3 -m pip install --no-build-isolation --no-deps --target "/tmp/ab-pkg-$name" . >"$OUT/pip-$name.log" 2>&1;
     echo "pip exit $?" >>"$OUT/pip-$name.log") &
  else
    echo "pip exit 0 (reused)" >"$OUT/pip-$name.log"
  fi
  tested "$t" && (build_tests "$t" "$jobs_each" >"$OUT/build-$name.log" 2>&1; echo "build exit $?" >>"$OUT/build-$name.log") &
done
wait
for t in "${trees[@]}"; do  # GPU tests: sharded processes on the one GPU (the float64 references run on the CPU)
  name=$(basename "$t")
  grep -q "pip exit 0" "$OUT/pip-$name.log" || { echo "== $name: package build failed"; tail -20 "$OUT/pip-$name.log"; }
  tested "$t" || continue
  grep -q "build exit 0" "$OUT/build-$name.log" || { echo "== $name: test build failed"; grep -E "error" -A3 "$OUT/build-$name.log" | head -30; continue; }
  res=$("$here/scripts/gpu_tests_sharded.sh" "$t/build-ab/tests/flashbuf_gpu_tests" "$GPU_TESTS" \
    "${TEST_SHARDS:-8}" "${TEST_TIMEOUT_S:-300}" "$OUT/tests-$name.log")
  echo "== $name tests: ${res##*$'\n'}"
  [ "$res" = "${res##*$'\n'}" ] || echo "${res%$'\n'*}"  # the failures
done
# AB_ROUNDS=n (default 1) measures the trees n times, in reversed order every other round
# (A B, B A, A B, ...: the first tree of a call ran ~3% fast on the H200, and clocks drift);
# round r > 1 writes <name>-r<r>.json (anchors only in round 1) and the table shows each
# point's geometric mean over the rounds.
# AB_INTERLEAVE=1 times point by point instead (bench/ab_interleaved.py: one bench.py server
# per tree, each point timed by every tree back to back, AB_ROUNDS rounds, 3 by default; no
# anchors run unless BENCH_ARGS ask for them, and then in every tree).
if [ "${AB_INTERLEAVE:-0}" = 1 ]; then
  rounds=${AB_ROUNDS:-3}
  builds=()
  for t in "${trees[@]}"; do
    name=$(basename "$t")
    builds+=("$name=/tmp/ab-pkg-$name:$(cat "$t/.commit" 2>/dev/null || echo unknown)")
  done
  python3 "$here/bench/ab_interleaved.py" --out "$OUT" --rounds "$rounds" "${builds[@]}" -- "$@" 2>&1 | tail -20
else
  rounds=${AB_ROUNDS:-1}
  for ((r = 1; r <= rounds; r++)); do
    order=("${trees[@]}")
    if ((r % 2 == 0)); then order=(); for ((i = ${#trees[@]} - 1; i >= 0; i--)); do order+=("${trees[i]}"); done; fi
    suffix=""; ((r > 1)) && suffix="-r$r"
    for t in "${order[@]}"; do
      name=$(basename "$t")
      commit=$(cat "$t/.commit" 2>/dev/null || echo unknown)
      anchors=(); { [ "$t" = "${trees[0]}" ] && ((r == 1)); } || anchors=(--anchors none)
      (cd /tmp && FLASHBUF_COMMIT=$commit PYTHONPATH="/tmp/ab-pkg-$name" PYTHONUNBUFFERED=1 python3 "$here/bench/bench.py" "$@" \
         "${anchors[@]}" --out "$OUT/$name$suffix.json" --plot "$OUT/$name$suffix.png" >"$OUT/bench-$name$suffix.log" 2>&1)
      echo "== $name bench$suffix exit $?"
    done
  done
fi
names=(); for t in "${trees[@]}"; do names+=("$(basename "$t")"); done
python3 "$here/bench/ab_summary.py" --table "$OUT" "${names[@]}" | tee "$OUT/ab-table.log"
# Logs, plots, the table above (ab-table.log) and every round's results travel in one archive:
# the device returns <= 8 files, so with several trees or calls the first round's files may be
# left out on their own; the archive still holds them.
(cd "$OUT" && tar czf ab-logs.tgz ./*.log ./*.png ./*.json 2>/dev/null; rm -f ./*.log ./*.png ./*-r[0-9]*.json)
