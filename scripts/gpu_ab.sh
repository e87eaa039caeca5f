#!/usr/bin/env bash
# A/B of source trees in ONE device call: the same benchmark, on the same GPU, for each tree
# (e.g. main and a branch, exported with `git archive <rev> | tar -x -C .ab/<name>` and carried
# to the device machine). Each tree's Python package builds into its own folder (in parallel,
# sharing the cores), then this tree's bench/bench.py (one harness for all) runs against each
# tree's package; the anchors run with the first tree only (the others get --anchors none, and
# their cuDNN ratios use the first tree's cuDNN times). Results go to $OUT/<name>.json, logs
# (and the plots) into $OUT/ab-logs.tgz, a table of the ratios of every tree to the first is printed last.
#   scripts/gpu_ab.sh .ab/main .ab/persistent -- --prefill --backend sm90 --target-ms 10
# GPU_TESTS="<gtest filter>" also builds and runs each tree's GPU tests (its own CMake build,
# TEST_SHARDS processes, default 8), before any benchmark; AB_SKIP_BUILD=1 reuses packages that
# an earlier run in the same call built (a second benchmark over the same trees, another $OUT);
# AB_TESTS_FIRST_ONLY=1 builds and runs the tests of the first tree only (the others are
# measured, not re-verified); AB_CMAKE_ARGS adds CMake options (e.g. -DFLASHBUF_INSTANTIATIONS=bf16_128_128), to the test
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

build_tests() {  # $1 tree, $2 build jobs
  cmake -S "$1" -B "$1/build-ab" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHBUF_ENABLE_CUDA=ON \
    -DFLASHBUF_CUDA_ARCHS="${FLASHBUF_CUDA_ARCHS:-90a}" -DFLASHBUF_BUILD_PYTHON=OFF ${AB_TEST_CMAKE_ARGS-${AB_CMAKE_ARGS:-}} >/dev/null &&
  cmake --build "$1/build-ab" -j"$2" --target flashbuf_gpu_tests
}
for t in "${trees[@]}"; do  # packages (and test binaries) build side by side, sharing the cores
  name=$(basename "$t")
  if [ -z "${AB_SKIP_BUILD:-}" ] || [ ! -d "/tmp/ab-pkg-$name" ]; then
    (cd "$t" && CMAKE_BUILD_PARALLEL_LEVEL=$jobs_each CMAKE_ARGS="-DFLASHBUF_CUDA_ARCHS=${FLASHBUF_CUDA_ARCHS:-90a} ${AB_CMAKE_ARGS:-}" \
       python3 -m pip install --no-build-isolation --no-deps --target "/tmp/ab-pkg-$name" . >"$OUT/pip-$name.log" 2>&1;
     echo "pip exit $?" >>"$OUT/pip-$name.log") &
  else
    echo "pip exit 0 (reused)" >"$OUT/pip-$name.log"
  fi
  [ -n "${GPU_TESTS:-}" ] && { [ -z "${AB_TESTS_FIRST_ONLY:-}" ] || [ "$t" = "${trees[0]}" ]; } && (build_tests "$t" "$jobs_each" >"$OUT/build-$name.log" 2>&1; echo "build exit $?" >>"$OUT/build-$name.log") &
done
wait
for t in "${trees[@]}"; do  # GPU tests: sharded processes on the one GPU (the float64 references run on the CPU)
  name=$(basename "$t")
  grep -q "pip exit 0" "$OUT/pip-$name.log" || { echo "== $name: package build failed"; tail -20 "$OUT/pip-$name.log"; }
  [ -n "${GPU_TESTS:-}" ] || continue
  [ -n "${AB_TESTS_FIRST_ONLY:-}" ] && [ "$t" != "${trees[0]}" ] && continue
  grep -q "build exit 0" "$OUT/build-$name.log" || { echo "== $name: test build failed"; grep -E "error" -A3 "$OUT/build-$name.log" | head -30; continue; }
  res=$("$here/scripts/gpu_tests_sharded.sh" "$t/build-ab/tests/flashbuf_gpu_tests" "$GPU_TESTS" \
    "${TEST_SHARDS:-8}" "${TEST_TIMEOUT_S:-300}" "$OUT/tests-$name.log")
  echo "== $name tests: ${res##*$'\n'}"
  [ "$res" = "${res##*$'\n'}" ] || echo "${res%$'\n'*}"  # the failures
done
for t in "${trees[@]}"; do
  name=$(basename "$t")
  commit=$(cat "$t/.commit" 2>/dev/null || echo unknown)
  anchors=(); [ "$t" = "${trees[0]}" ] || anchors=(--anchors none)
  (cd /tmp && FLASHBUF_COMMIT=$commit PYTHONPATH="/tmp/ab-pkg-$name" PYTHONUNBUFFERED=1 python3 "$here/bench/bench.py" "$@" \
     "${anchors[@]}" --out "$OUT/$name.json" --plot "$OUT/$name.png" >"$OUT/bench-$name.log" 2>&1)
  echo "== $name bench exit $?"
done
(cd "$OUT" && tar czf ab-logs.tgz ./*.log ./*.png 2>/dev/null; rm -f ./*.log ./*.png)  # the device returns <= 8 files
python3 - "$OUT" "${trees[@]}" <<'PY'
import json, os, sys
out, trees = sys.argv[1], [os.path.basename(t) for t in sys.argv[2:]]
runs = {}
for name in trees:
    try:
        runs[name] = json.load(open(os.path.join(out, name + ".json")))["rows"]
    except OSError:
        print(f"{name}: no results")
base = trees[0]
if base in runs:
    for name in trees[1:]:
        if name not in runs:
            continue
        print(f"\n{name} / {base} (flashbuf speed; > 1: {name} faster), and each vs cudnn:")
        same = lambda a, b: all(a.get(k) == b.get(k) for k in ("kind", "d", "sq", "causal", "b", "hq", "sk", "page"))
        for a, b in zip(runs[base], runs[name]):
            if not same(a, b):
                sys.exit(f"{name}: its rows are not {base}'s (different arguments?)")
            if not (a.get("flashbuf") and b.get("flashbuf")):
                print(f"  {a['kind']} d={a['d']} sq={a['sq']} causal={a['causal']} sk={a['sk']}: missing in "
                      f"{base if not a.get('flashbuf') else name}")
            else:
                key = " ".join(f"{k}={a[k]}" for k in ("d", "sq", "causal", "b", "hq", "sk", "page") if k in a)
                faster = b["flashbuf"] / a["flashbuf"] if a["unit"] == "TFLOP/s" else a["flashbuf"] / b["flashbuf"]
                vs = lambda r: (r["flashbuf"] / a["cudnn"] if r["unit"] == "TFLOP/s" else a["cudnn"] / r["flashbuf"]) if a.get("cudnn") else float("nan")
                print(f"  {key:45s} {faster:5.2f}   {vs(a):5.2f} -> {vs(b):5.2f}")
PY
