#!/usr/bin/env bash
# Runs a GPU test binary as SHARDS gtest shards side by side on the one GPU (the float64
# references run on the CPU and dominate the tests' time), each line-buffered under a timeout
# (a timed-out shard keeps what it ran), all output into LOG; prints the failures, then one
# summary line: "N ok, M failed, K of SHARDS shards finished".
#   scripts/gpu_tests_sharded.sh BINARY GTEST_FILTER SHARDS TIMEOUT_S LOG
set -uo pipefail
[ $# -eq 5 ] || { echo "usage: scripts/gpu_tests_sharded.sh BINARY GTEST_FILTER SHARDS TIMEOUT_S LOG" >&2; exit 2; }
binary=$1 filter=$2 shards=$3 timeout_s=$4 log=$5
pids=()
for i in $(seq 0 $((shards - 1))); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout "$timeout_s" stdbuf -oL \
    "$binary" --gtest_filter="$filter" >"$log.$i" 2>&1 &
  pids+=($!)
done
wait "${pids[@]}"
cat "$log".[0-9]* >"$log" && rm -f "$log".[0-9]*
grep -E '^\[  FAILED  \] [A-Za-z]|Failure' "$log" | head -20
echo "$(grep -c '^\[       OK \]' "$log") ok, $(grep -c '^\[  FAILED  \] [A-Za-z]' "$log") failed," \
  "$(grep -c '^\[  PASSED  \]' "$log") of $shards shards finished"
