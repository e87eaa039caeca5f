#!/usr/bin/env bash
# The serving grid against FlashAttention-4 and the longest-first varlen order (issue 29, items 1
# and 2) on the H200, in one device call of under 8 minutes, from the repository root:
#
#   scripts/gpu/serving.sh
#
#   1. builds the package with every instantiation for sm_90a (pip --target /tmp/serving-pkg)
#      and, beside it, the C++ GPU tests with the instantiations they use (half the cores each);
#   2. runs the GPU tests of varlen prefill (the longest-first order against the grid order bit
#      for bit, and against the float64 reference; C++ and the Python CUDA-graph replays);
#   3. runs `bench/bench.py --serving --rounds 3` with FA4 when `import flash_attn.cute` works
#      (carried as scripts/gpu/fa4_site.sh's parts, or on the PYTHONPATH), writing
#      $OUT/h200-serving-<commit>.json and the flashbuf / FA4 ratio table;
#
# $OUT receives serving-summary.txt (every step's result), the results JSON and serving-logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
OUT=${OUT:-$root/gpu-out}
mkdir -p "$OUT"
logs=$(mktemp -d /tmp/serving-logs.XXXXXX)
jobs=$(nproc)
start=$(date +%s)
budget_s=${SERVING_BUDGET_S:-450}
summary="$OUT/serving-summary.txt"
: >"$summary"
pack_logs() { (cd "$logs" && tar czf "$OUT/serving-logs.tgz" . 2>/dev/null); }
say() { echo "$*" | tee -a "$summary"; pack_logs; }
elapsed() { echo $(( $(date +%s) - start )); }
cap() { local left=$(( budget_s - $(elapsed) )); [ "$left" -lt 15 ] && left=1; [ "$left" -lt "$1" ] && echo "$left" || echo "$1"; }
trap pack_logs EXIT
commit=$(cat .commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)  # .commit first: the device copy's git can be stale
export FLASHBUF_COMMIT=${FLASHBUF_COMMIT:-$commit}
say "serving.sh at $FLASHBUF_COMMIT on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
eval "$(bash scripts/gpu/fa4_site.sh env 2>>"$logs/fa4-import.log")"
if python3 -c "import flash_attn.cute" >"$logs/fa4-import.log" 2>&1; then
  say "FA4: flash_attn.cute imports ($(python3 -c 'from importlib.metadata import version; print(version("flash-attn-4"))' 2>/dev/null || echo 'version unknown'))"
else
  say "FA4: flash_attn.cute does not import (fa4 cells stay null): $(tail -1 "$logs/fa4-import.log")"
fi

# ---- 1. build: the package (every instantiation) and the test binary, half the cores each -------
(cmake -S . -B build-serving -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHBUF_ENABLE_CUDA=ON \
   -DFLASHBUF_CUDA_ARCHS=90a "-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128;fp16_64_64" \
   -DFLASHBUF_BUILD_TESTS=ON -DFLASHBUF_BUILD_TOOLS=OFF >"$logs/cmake.log" 2>&1 &&
 timeout "$(cap 300)" cmake --build build-serving -j$((jobs / 2)) --target flashbuf_gpu_tests >>"$logs/cmake.log" 2>&1
 echo "exit $?" >>"$logs/cmake.log") &
rm -rf /tmp/serving-pkg
(CMAKE_BUILD_PARALLEL_LEVEL=$((jobs / 2)) CMAKE_ARGS="-DFLASHBUF_CUDA_ARCHS=90a" timeout "$(cap 300)" \
   python3 -m pip install --no-build-isolation --no-deps --target /tmp/serving-pkg . >"$logs/pip.log" 2>&1
 echo "exit $?" >>"$logs/pip.log") &
wait
say "[$(elapsed)s] cmake build: $(tail -1 "$logs/cmake.log"); pip install: $(tail -1 "$logs/pip.log")"
grep -E "error" -A3 "$logs/cmake.log" | head -20 | tee -a "$summary"
grep -E "error" -A3 "$logs/pip.log" | head -20 | tee -a "$summary"

# ---- 2. the varlen prefill tests: longest first against grid order and the reference ------------
if [ -x build-serving/tests/flashbuf_gpu_tests ]; then
  t=$(cap 120)
  res=$(bash scripts/gpu_tests_sharded.sh build-serving/tests/flashbuf_gpu_tests '*PrefillGpu.Varlen*:PrefillKernels.*' 4 "$t" "$logs/gtest-varlen.log")
  say "[$(elapsed)s] gtest varlen prefill: ${res##*$'\n'}"
  [ "$res" = "${res##*$'\n'}" ] || say "${res%$'\n'*}"
fi

# ---- 3. the serving grid with FA4 (the file of record) --------------------------------------------
if [ -d /tmp/serving-pkg/flashbuf ]; then
  # the Python varlen tests first: graph capture of the order's prologue, replays over new lengths
  # (and the FlashAttention-compatible varlen entry points, where this tree has them)
  tests=("$root/python/tests/test_gpu.py")
  [ -f "$root/python/tests/test_compat_gpu.py" ] && tests+=("$root/python/tests/test_compat_gpu.py")
  (cd /tmp && PYTHONPATH=/tmp/serving-pkg${PYTHONPATH:+:$PYTHONPATH} timeout "$(cap 90)" python3 -X faulthandler -m pytest -v -rs \
     -p no:cacheprovider --rootdir "$root" "${tests[@]}" -k varlen >"$logs/pytest-varlen.log" 2>&1)
  say "[$(elapsed)s] pytest ${tests[*]##*/} -k varlen (exit $?): $(grep -E '^=+ .*(passed|failed|error)' "$logs/pytest-varlen.log" | tail -1)"
  grep -E "^(FAILED|ERROR) " "$logs/pytest-varlen.log" | head -10 | tee -a "$summary"
  json="$OUT/h200-serving-$FLASHBUF_COMMIT.json"
  (cd /tmp && PYTHONPATH=/tmp/serving-pkg${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 timeout "$(cap 260)" \
     python3 "$root/bench/bench.py" --serving --rounds 3 --target-ms 10 --out "$json" >"$logs/bench-serving.log" 2>&1)
  say "[$(elapsed)s] bench --serving --rounds 3 --target-ms 10 (exit $?): $json"
  sed -n '/== serving grid/,$p' "$logs/bench-serving.log" | tee -a "$summary"
  grep -E "^  ! " "$logs/bench-serving.log" | head -20 | tee -a "$summary"
fi
say "[$(elapsed)s] done"
