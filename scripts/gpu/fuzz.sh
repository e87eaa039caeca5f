#!/usr/bin/env bash
# On the device machine (an H200), from the repository root: build every instantiation for
# sm_90a and sm_80 with 16 jobs, run the whole GPU suite (8 gtest shards side by side on the
# one GPU) with timing, the fuzz campaign again on a 3-block persistent Hopper grid, the host
# tests, and compute-sanitizer memcheck on small fuzz cases. Logs go to $OUT (default
# ./gpu-out): summary-<phases>.txt, slowest.txt (the 25 slowest GPU tests) and logs-<phases>.tgz (every log).
#   scripts/gpu/fuzz.sh [build] [suite] [walk] [sanitize]   (default: all four, in that order)
#     build     cmake + ninja into build-gpu
#     suite     every GPU test, timed (the 5-minute budget is this phase)
#     walk      the fuzz shards again on a 3-block persistent Hopper grid, and the host tests
#     sanitize  compute-sanitizer memcheck on two small fuzz shards (one on a 2-block grid)
# The phases can run in separate calls (the build directory build-gpu stays between them);
# each stays under 10 minutes on its own.
# Knobs: TEST_SHARDS (default 8), TEST_TIMEOUT_S (per shard, default 400), FLASHBUF_FUZZ_SEED
# (replays a fuzz run; printed in every fuzz failure), JOBS (default 16).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
phases=${*:-build suite walk sanitize}
JOBS=${JOBS:-16}
SHARDS=${TEST_SHARDS:-8}
TIMEOUT_S=${TEST_TIMEOUT_S:-400}
BIN=./build-gpu/tests/flashbuf_gpu_tests
SANITIZER=${SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
summary="$OUT/summary-${phases// /-}.txt"
note() { echo "$*" | tee -a "$summary"; }
step() { echo; echo "=== $* ($(date +%T))"; }
failed=0
: >"$summary"
note "commit $(cat .commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown), phases: $phases"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader 2>&1 | tee "$OUT/gpu.txt" | sed 's/^/gpu: /' | tee -a "$summary"

if [[ " $phases " == *" build "* ]]; then
  step build
  start=$(date +%s)
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHBUF_ENABLE_CUDA=ON \
    -DFLASHBUF_CUDA_ARCHS="90a;80" -DFLASHBUF_BUILD_TESTS=ON >"$OUT/configure.log" 2>&1 \
    || { tail -30 "$OUT/configure.log"; note "configure FAILED"; exit 1; }
  if ! cmake --build build-gpu -j"$JOBS" >"$OUT/build.log" 2>&1; then
    grep -E "error|Error" -A5 "$OUT/build.log" | head -60
    note "build FAILED after $(( $(date +%s) - start )) s"
    (cd "$OUT" && tar czf "logs-${phases// /-}.tgz" ./*.log && rm -f ./*.log)
    exit 1
  fi
  note "build: $(( $(date +%s) - start )) s with $JOBS jobs (every instantiation, sm_90a and sm_80)"
fi

[ -x "$BIN" ] || { note "no $BIN: run the build phase first"; exit 1; }

# Runs the GPU test binary as $SHARDS shards under FILTER with the environment given before it;
# notes the wall time and the result line of scripts/gpu_tests_sharded.sh.
sharded() {  # name filter log [VAR=value ...]
  local name=$1 filter=$2 log=$3
  shift 3
  local start result
  start=$(date +%s)
  result=$(env "$@" scripts/gpu_tests_sharded.sh "$BIN" "$filter" "$SHARDS" "$TIMEOUT_S" "$log")
  echo "$result"
  note "$name: $(( $(date +%s) - start )) s wall, ${result##*$'\n'}"
  grep -q " 0 failed, $SHARDS of $SHARDS shards finished" <<<"${result##*$'\n'}" || failed=1
}

if [[ " $phases " == *" suite "* ]]; then
  step "gpu suite (all GPU tests, $SHARDS shards)"
  sharded "gpu suite" '*' "$OUT/gpu_suite.log"
  # Test times, slowest first (gtest prints "(N ms)" after each OK / FAILED line).
  grep -E '^\[ +(OK|FAILED) +\] .* \([0-9]+ ms\)$' "$OUT/gpu_suite.log" \
    | sed -E 's/^\[ +(OK|FAILED) +\] (.*) \(([0-9]+) ms\)$/\3 ms  \1  \2/' | sort -rn | head -25 >"$OUT/slowest.txt"
  note "slowest GPU test: $(head -1 "$OUT/slowest.txt")"
  grep -h '^\[ FUZZ' "$OUT/gpu_suite.log" | awk '{n += $(NF-2)} END {print "fuzz cases run on the GPU: " n + 0}' | tee -a "$summary"
  grep -h '^\[ COVERAGE \]' "$OUT/gpu_suite.log" | tr ';' '\n' | sed -E 's/^\[ COVERAGE \] [a-z ]+://' \
    | awk 'NF { n = $NF; $NF = ""; sub(/ +$/, ""); sub(/^ +/, ""); c[$0] += n } END { for (k in c) print "  " k ": " c[k] }' \
    | sort | tee -a "$summary"
fi

if [[ " $phases " == *" walk "* ]]; then
  step "fuzz campaign on a 3-block persistent Hopper grid"
  TIMEOUT_S=${WALK_TIMEOUT_S:-300} sharded "fuzz, FLASHBUF_PREFILL_GRID=3" '*FuzzGpu*' "$OUT/fuzz_grid3.log" FLASHBUF_PREFILL_GRID=3

  step "host tests"
  start=$(date +%s)
  ctest --test-dir build-gpu -L host -j"$JOBS" --output-on-failure >"$OUT/host_tests.log" 2>&1 || failed=1
  note "host tests: $(( $(date +%s) - start )) s, $(grep -E 'tests passed' "$OUT/host_tests.log")"
  grep -E '^\s+[0-9]+ - .*\(Failed|Timeout\)' "$OUT/host_tests.log" | sed 's/^/  host failed: /' | tee -a "$summary"
fi

if [[ " $phases " == *" sanitize "* ]]; then
  step "compute-sanitizer memcheck on small fuzz cases"
  # FLASHBUF_FUZZ_SMALL: the fuzz shards at small sizes (tests/gpu/test_fuzz.cu).
  for run in "0:" "1:FLASHBUF_PREFILL_GRID=2"; do
    shard=${run%%:*} extra=${run#*:}
    start=$(date +%s)
    env FLASHBUF_FUZZ_SMALL=1 ${extra:+"$extra"} timeout 240 "$SANITIZER" --tool memcheck --error-exitcode 9 \
      "$BIN" --gtest_filter="Shards/FuzzGpu.AgainstFloat64Reference/$shard:NanRuleGpu.Decode" --gtest_brief=1 \
      >"$OUT/memcheck_fuzz_$shard.log" 2>&1
    rc=$?
    [ "$rc" = 0 ] || failed=1
    note "memcheck fuzz shard $shard ${extra:-}: exit $rc, $(( $(date +%s) - start )) s," \
         "$(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/memcheck_fuzz_$shard.log") clean summaries," \
         "$(grep -h '^\[ FUZZ' "$OUT/memcheck_fuzz_$shard.log" | head -1)"
  done
fi

(cd "$OUT" && tar czf "logs-${phases// /-}.tgz" ./*.log && rm -f ./*.log)
echo; echo "=== summary"; cat "$summary"
exit $failed
