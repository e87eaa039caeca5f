#!/usr/bin/env bash
# Attention sinks (issue 30) and the GPU side of the NaN rule (issue 26, item 2) on the H200.
# Each mode is one device call of under 8 minutes, from the repository root:
#
#   scripts/gpu/sinks.sh            (= all) build every instantiation for sm_90a + sm_80 (CMake
#                                   tests and the Python package side by side), the C++ sinks suite
#                                   (tests/gpu/test_sinks.cu; its sm90 prefill again with the
#                                   persistent grid forced), the Python sinks tests, the sinks A/B
#                                   benchmark (flashbuf without and with random sinks, interleaved
#                                   in the same rounds), then the existing prefill / decode / merge
#                                   GPU tests whose epilogues changed, in the time that is left
#   scripts/gpu/sinks.sh ab MAIN    sinks absent: this tree against MAIN (a source tree of main,
#                                   e.g. `scripts/ab_trees.sh main`,
#                                   carried as .ab) on a few points of the prefill and decode grids,
#                                   through scripts/gpu_ab.sh (2 rounds, alternating order)
#
# $OUT receives sinks-summary.txt (every step's result), the results JSON and sinks-logs.tgz
# (logs and plots), at most 8 files. Needs nvcc, python3 with torch, nanobind, scikit-build-core
# and pytest; no network.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
OUT=${OUT:-$root/gpu-out}
mkdir -p "$OUT"
logs=$(mktemp -d /tmp/sinks-logs.XXXXXX)
jobs=$(nproc)
start=$(date +%s)
budget_s=${SINKS_BUDGET_S:-450}  # every step's timeout is cut to what is left of this
summary="$OUT/sinks-summary.txt"
: >"$summary"
pack_logs() { (cd "$logs" && tar czf "$OUT/sinks-logs.tgz" . 2>/dev/null); }
say() { echo "$*" | tee -a "$summary"; pack_logs; }  # the logs so far travel even if the call is cut
elapsed() { echo $(( $(date +%s) - start )); }
# A step's timeout: its own cap, or the budget left if less; 1 once under 15 s are left (never
# 0, which `timeout` takes as no limit).
cap() { local left=$(( budget_s - $(elapsed) )); [ "$left" -lt 15 ] && left=1; [ "$left" -lt "$1" ] && echo "$left" || echo "$1"; }
trap pack_logs EXIT
commit=$(cat .commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)  # .commit first: the device copy's git can be stale
export FLASHBUF_COMMIT=${FLASHBUF_COMMIT:-$commit}
say "sinks.sh $* at $FLASHBUF_COMMIT on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"

# Sharded gtest run: $1 filter, $2 shards, $3 timeout cap (s), $4 log name; one summary line.
gtests() {
  local res t
  t=$(cap "$3")
  [ "$t" -gt 1 ] || { say "[$(elapsed)s] gtest $4: skipped, no time left"; return; }
  res=$(bash scripts/gpu_tests_sharded.sh build-sinks/tests/flashbuf_gpu_tests "$1" "$2" "$t" "$logs/$4.log")
  say "[$(elapsed)s] gtest $4 ($1): ${res##*$'\n'}"
  [ "$res" = "${res##*$'\n'}" ] || say "${res%$'\n'*}"
}

mode_all() {
  # ---- build: the test binary (CMake) and the package (pip), half the cores each -------------
  (cmake -S . -B build-sinks -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHBUF_ENABLE_CUDA=ON \
     -DFLASHBUF_CUDA_ARCHS="90a;80" -DFLASHBUF_BUILD_TESTS=ON -DFLASHBUF_BUILD_TOOLS=OFF >"$logs/cmake.log" 2>&1 &&
   cmake --build build-sinks -j$((jobs / 2)) --target flashbuf_gpu_tests >>"$logs/cmake.log" 2>&1
   echo "exit $?" >>"$logs/cmake.log") &
  rm -rf /tmp/sinks-pkg
  (CMAKE_BUILD_PARALLEL_LEVEL=$((jobs / 2)) CMAKE_ARGS="-DFLASHBUF_CUDA_ARCHS=90a;80" \
     python3 -m pip install --no-build-isolation --no-deps --target /tmp/sinks-pkg . >"$logs/pip.log" 2>&1
   echo "exit $?" >>"$logs/pip.log") &
  wait
  say "[$(elapsed)s] cmake build: $(tail -1 "$logs/cmake.log"); pip install: $(tail -1 "$logs/pip.log")"
  grep -E "error" -A3 "$logs/cmake.log" | head -20 | tee -a "$summary"
  grep -E "error" -A3 "$logs/pip.log" | head -20 | tee -a "$summary"

  # ---- C++: the sinks suite, then its Hopper prefill on the persistent grid wherever it applies --
  if [ -x build-sinks/tests/flashbuf_gpu_tests ]; then
    gtests '*Sinks*' 8 200 sinks
    # The error table: per test and path (decode: its splits), the largest error of O and LSE
    # against float64 and its share of the rule's bound (twice the naive error plus atol).
    say "| path | checks | O max error | of its bound | LSE max error | of its bound |"
    say "|---|---|---|---|---|---|"
    say "$(awk -F' [|] ' '/^\[ sinks error \]/ {
        key = substr($1, 17); split($2, o, " "); split($3, l, " ")
        if (o[2] > oe[key]) oe[key] = o[2]; if (o[3] > 0 && o[2] / o[3] > orat[key]) orat[key] = o[2] / o[3]
        if (l[2] > le[key]) le[key] = l[2]; if (l[3] > 0 && l[2] / l[3] > lrat[key]) lrat[key] = l[2] / l[3]
        n[key]++ }
      END { for (k in n) printf "| %s | %d | %.2e | %.2f | %.2e | %.2f |\n", k, n[k], oe[k], orat[k], le[k], lrat[k] }' \
      "$logs/sinks.log" | sort)"
    FLASHBUF_PREFILL_GRID=on gtests 'Kernels/SinksPrefill.*/sm90' 4 120 sinks-persistent-forced
  fi

  # ---- Python: the sinks tests (CPU and CUDA), and the CUDA decode / merge tests ----------------
  if [ -d /tmp/sinks-pkg/flashbuf ]; then
    (cd /tmp && PYTHONPATH=/tmp/sinks-pkg FLASHBUF_TEST_TRACE=1 timeout "$(cap 240)" python3 -X faulthandler -m pytest -v -rs \
       -p no:cacheprovider --rootdir "$root" "$root/python/tests/test_sinks.py" >"$logs/pytest-sinks.log" 2>&1)
    say "[$(elapsed)s] pytest test_sinks.py (exit $?): $(grep -E '^=+ .*(passed|failed|error)' "$logs/pytest-sinks.log" | tail -1)"
    grep -E "^(FAILED|ERROR) " "$logs/pytest-sinks.log" | head -20 | tee -a "$summary"
    (cd /tmp && PYTHONPATH=/tmp/sinks-pkg timeout "$(cap 150)" python3 -X faulthandler -m pytest -v -rs -p no:cacheprovider \
       --rootdir "$root" "$root/python/tests/test_gpu.py" -k "decode or merge" >"$logs/pytest-gpu.log" 2>&1)
    say "[$(elapsed)s] pytest test_gpu.py -k 'decode or merge' (exit $?): $(grep -E '^=+ .*(passed|failed|error)' "$logs/pytest-gpu.log" | tail -1)"
    grep -E "^(FAILED|ERROR) " "$logs/pytest-gpu.log" | head -20 | tee -a "$summary"

    # ---- the cost of sinks: flashbuf without and with them, same process, same rounds ----------
    (cd /tmp && PYTHONPATH=/tmp/sinks-pkg PYTHONUNBUFFERED=1 timeout "$(cap 150)" python3 "$root/bench/bench.py" --prefill \
       --sinks ab --anchors none --d 64,128,256 --s 1024,4096 --causal both --rounds 3 --target-ms 10 \
       --out "$OUT/h200-sinks-prefill-ab.json" --plot "$logs/sinks-prefill-ab.png" >"$logs/bench-prefill.log" 2>&1)
    say "[$(elapsed)s] bench prefill --sinks ab (exit $?)"
    sed -n '/== sinks A\/B/,$p' "$logs/bench-prefill.log" | tee -a "$summary"
    (cd /tmp && PYTHONPATH=/tmp/sinks-pkg PYTHONUNBUFFERED=1 timeout "$(cap 150)" python3 "$root/bench/bench.py" --decode \
       --sinks ab --anchors none --heads 32/8,64/8 --b 1,8,32 --kv 2048,32768 --pages 0,16 --rounds 3 --target-ms 10 \
       --out "$OUT/h200-sinks-decode-ab.json" --plot "$logs/sinks-decode-ab.png" >"$logs/bench-decode.log" 2>&1)
    say "[$(elapsed)s] bench decode --sinks ab (exit $?)"
    sed -n '/== sinks A\/B/,$p' "$logs/bench-decode.log" | tee -a "$summary"
    grep -E "^  ! " "$logs/bench-prefill.log" "$logs/bench-decode.log" | head -10 | tee -a "$summary"
  fi

  # ---- the existing GPU tests of the changed epilogues, in the time left -----------------------
  if [ -x build-sinks/tests/flashbuf_gpu_tests ]; then
    gtests 'DecodeGpu.*:DecodeSanitizer.*:MergeStatesGpu.*' 8 $(( (budget_s - $(elapsed)) / 2 )) decode-existing
    gtests '*PrefillHeadDims*:*PrefillGpu.RowsWithoutKeys*:*PrefillGpu.PagedMatchesContiguous*:*PrefillGpu.Varlen*:*PrefillGpu.Gqa*:*PrefillGpu.ManyItems*:*PrefillGpu.ScoresGrowing*:PrefillKernels.*' \
      8 "$budget_s" prefill-existing
  fi
  say "[$(elapsed)s] done"
}

mode_ab() {
  local main=${1:?usage: scripts/gpu/sinks.sh ab MAIN_TREE}
  [ -d "$main" ] || { say "no tree at $main (prepare it with git archive, carry .ab)"; exit 2; }
  # The no-sink paths of this tree against main: prefill (sm90 as auto picks it) and decode.
  OUT="$OUT" AB_ROUNDS=2 bash scripts/gpu_ab.sh "$main" "$root" -- --prefill --d 64,128,256 --s 1024,4096,16384 \
    --causal both --target-ms 10 --anchors none >"$logs/ab-prefill.txt" 2>&1
  say "[$(elapsed)s] A/B prefill, sinks absent (exit $?):"
  sed -n '/ \/ /,$p' "$logs/ab-prefill.txt" | tee -a "$summary"
  mkdir -p "$OUT/decode"
  OUT="$OUT/decode" AB_ROUNDS=2 AB_SKIP_BUILD=1 bash scripts/gpu_ab.sh "$main" "$root" -- --decode --heads 32/8,64/8 \
    --b 1,8,32 --kv 2048,32768 --pages 0,16 --target-ms 10 --anchors none >"$logs/ab-decode.txt" 2>&1
  say "[$(elapsed)s] A/B decode, sinks absent (exit $?):"
  sed -n '/ \/ /,$p' "$logs/ab-decode.txt" | tee -a "$summary"
  # $OUT keeps at most 8 files: the decode results beside the prefill ones, their logs in ours.
  for f in "$OUT"/decode/*.json; do [ -e "$f" ] && mv "$f" "$OUT/decode-$(basename "$f")"; done
  for f in "$OUT"/decode/*; do [ -e "$f" ] && mv "$f" "$logs/decode-$(basename "$f")"; done
  rmdir "$OUT/decode" 2>/dev/null
}

case "${1:-all}" in
  all) mode_all ;;
  ab) shift; mode_ab "$@" ;;
  *) echo "usage: scripts/gpu/sinks.sh [all | ab MAIN_TREE]" >&2; exit 2 ;;
esac
