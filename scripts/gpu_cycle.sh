#!/usr/bin/env bash
# One whole GPU cycle on the device machine (an H200): configure, build with every core, run
# the GPU tests, compute-sanitizer on small cases, install the Python package, benchmark, and
# print a short table last. Results go to $OUT (default ./gpu-out), the logs into one
# $OUT/logs.tgz, written again after every step (the device tool brings back at most 8 files,
# and a cycle cut short by a call's time limit keeps the logs of the steps it finished).
#   scripts/gpu_cycle.sh [--tests-only] [--no-sanitize] [--bench-args "..."]
# Narrower iterations: GTEST_FILTER (GPU tests to run, default all), PYTEST_FILES (default
# test_gpu.py; "none" skips), SANITIZE_FILTER (small cases under compute-sanitizer),
# TEST_SHARDS (parallel gtest processes on the one GPU, default 4: the float64 references
# run on the CPU and dominate the tests' time), TEST_TIMEOUT_S (default 400), WALK_FILTER (the
# tests run again on a 3-block persistent Hopper prefill grid).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
LOGS=$(mktemp -d)  # the logs, archived into $OUT/logs.tgz as the steps end
TESTS_ONLY=0
BENCH_ARGS=""
SANITIZE=1
while [ $# -gt 0 ]; do
  case "$1" in
    --tests-only) TESTS_ONLY=1 ;;
    --no-sanitize) SANITIZE=0 ;;
    --bench-args) BENCH_ARGS="$2"; shift ;;
    *) echo "gpu_cycle: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
JOBS=$(nproc)
summary=()
step() { echo; echo "=== $* ($(date +%T))"; }
# Each result is printed as it comes, not only in the summary at the end: a cycle cut short by
# the call's time limit still reports what it finished (its logs may not come back).
result() { summary+=("$1"); echo ">> $1"; (cd "$LOGS" && tar czf "$OUT/logs.tgz" ./*.log 2>/dev/null); }

step configure
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv | tee "$OUT/gpu.txt"
# The Debian packages a machine without network lacks (oneDNN, CLI11, nlohmann/json), carried
# as .deps/debs (scripts/gpu/device_deps.sh).
source scripts/gpu/device_deps.sh unpack
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHBUF_ENABLE_CUDA=ON \
  -DFLASHBUF_CUDA_ARCHS="${FLASHBUF_CUDA_ARCHS:-90a}" >"$LOGS/configure.log" 2>&1 || { tail -30 "$LOGS/configure.log"; exit 1; }
step build
start=$(date +%s)
cmake --build build-gpu -j"$JOBS" >"$LOGS/build.log" 2>&1 || { grep -E "error|Error" -A5 "$LOGS/build.log" | head -60; exit 1; }
result "build: $(( $(date +%s) - start )) s on $JOBS cores"

if [ "$TESTS_ONLY" = 0 ]; then  # the package builds on the CPU while the GPU tests run
  (FLASHBUF_COMMIT=${FLASHBUF_COMMIT:-unknown} CMAKE_ARGS="-DFLASHBUF_CUDA_ARCHS=${FLASHBUF_CUDA_ARCHS:-90a}" \
    python3 -m pip install --no-build-isolation --no-deps . >"$LOGS/pip.log" 2>&1; echo "pip exit $?" >>"$LOGS/pip.log") &
  pip_pid=$!
fi

step gpu tests
tests=$(scripts/gpu_tests_sharded.sh ./build-gpu/tests/flashbuf_gpu_tests "${GTEST_FILTER:-*}" "${TEST_SHARDS:-4}" \
  "${TEST_TIMEOUT_S:-400}" "$LOGS/gpu_tests.log")
echo "$tests"
result "gpu tests: ${tests##*$'\n'}"
# The Hopper prefill's persistent walk with many items per block: every batch-form problem of
# the Hopper prefill tests again on a grid of 3 blocks (FLASHBUF_PREFILL_GRID, cuda/prefill_launch.cuh).
walk=$(FLASHBUF_PREFILL_GRID=3 scripts/gpu_tests_sharded.sh ./build-gpu/tests/flashbuf_gpu_tests \
  "${WALK_FILTER:-*PrefillGpu.*/sm90:*PrefillHeadDims.*/sm90_*}" "${TEST_SHARDS:-4}" "${TEST_TIMEOUT_S:-400}" "$LOGS/gpu_tests_walk.log")
echo "$walk"
result "gpu tests, persistent walk on 3 blocks: ${walk##*$'\n'}"
step host tests
ctest --test-dir build-gpu -L host -j"$JOBS" --output-on-failure >"$LOGS/host_tests.log" 2>&1
result "host tests: $(grep -E 'tests passed' "$LOGS/host_tests.log")"

if [ "$SANITIZE" = 1 ]; then
  step compute-sanitizer
  for tool in memcheck racecheck synccheck; do
    compute-sanitizer --tool $tool --error-exitcode 9 ./build-gpu/tests/flashbuf_gpu_tests \
      --gtest_filter="${SANITIZE_FILTER:-*Sanitizer*:BuffersRoundTrip.*:WgmmaBuffers.*}" --gtest_brief=1 >"$LOGS/sanitize_$tool.log" 2>&1
    result "sanitizer $tool: exit $? ($(grep -c 'ERROR SUMMARY: 0' "$LOGS/sanitize_$tool.log") clean summaries)"
    # The small prefill cases again on a 2-block persistent grid (several items per block).
    FLASHBUF_PREFILL_GRID=2 compute-sanitizer --tool $tool --error-exitcode 9 ./build-gpu/tests/flashbuf_gpu_tests \
      --gtest_filter='Kernels/PrefillGpu.SanitizerSmallCases/sm90' --gtest_brief=1 >"$LOGS/sanitize_walk_$tool.log" 2>&1
    result "sanitizer $tool, persistent walk: exit $?"
  done
fi

if [ "$TESTS_ONLY" = 0 ]; then
  step cli
  ./build-gpu/flashbuf run 2>&1 | tee "$LOGS/run.log" | tail -15
  result "flashbuf run: $(tail -n1 "$LOGS/run.log")"
  step python package
  wait "$pip_pid"
  grep -q "pip exit 0" "$LOGS/pip.log" || tail -30 "$LOGS/pip.log"
  if [ "${PYTEST_FILES:-test_gpu.py}" != none ]; then
    # gpu_pytest.sh ends with one "<file> exit <status>" line per test file.
    FILES="${PYTEST_FILES:-test_gpu.py}" bench/gpu_pytest.sh -q >"$LOGS/pytest.log" 2>&1
    result "pytest: $(grep -E '^test_[a-z_]+\.py +exit' "$LOGS/pytest.log" | tr -s ' ' | paste -sd, -)"
  fi
  step benchmark
  PYTHONUNBUFFERED=1 python3 bench/bench.py --out "$OUT/bench.json" --plot "$OUT/bench.png" $BENCH_ARGS 2>&1 | tee "$LOGS/bench.log" | tail -60
fi

(cd "$LOGS" && tar czf "$OUT/logs.tgz" ./*.log)
echo; echo "=== summary"; printf '%s\n' "${summary[@]}"
