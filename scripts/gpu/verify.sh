#!/usr/bin/env bash
# The whole verification on the GPU machine (an H200), from the repository root, in phases that
# each fit one device call (the build folders stay between calls while the machine is warm):
#   scripts/gpu/verify.sh build     the dependencies the machine cannot install (carried .deps/debs,
#                                   scripts/gpu/device_deps.sh), the CMake build of every
#                                   instantiation for sm_90a and sm_80 (build-gpu) and, beside it,
#                                   the Python package with every instantiation (/root/flashbuf-site)
#   scripts/gpu/verify.sh suite     every C++ GPU test, 8 shards on the one GPU, timed
#                                   (scripts/gpu/fuzz.sh suite)
#   scripts/gpu/verify.sh python    every Python test on CUDA and CPU against the package
#   scripts/gpu/verify.sh walk      the fuzz campaign on a 3-block persistent Hopper grid (fuzz.sh walk)
#   scripts/gpu/verify.sh sanitize  compute-sanitizer memcheck on the small cases (fuzz.sh sanitize)
# Several phases may be given at once. Logs and summaries go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
SITE=/root/flashbuf-site
phases=${*:-build suite python walk sanitize}
summary="$OUT/verify-summary.txt"
note() { echo "$*" | tee -a "$summary"; }
source scripts/gpu/device_deps.sh unpack
export FLASHBUF_COMMIT=${FLASHBUF_COMMIT:-$(cat .commit 2>/dev/null || echo unknown)}
failed=0

if [[ " $phases " == *" build "* ]]; then
  start=$(date +%s)
  (CMAKE_BUILD_PARALLEL_LEVEL=8 CMAKE_ARGS="-DFLASHBUF_CUDA_ARCHS=90a;80" \
     python3 -m pip install --no-build-isolation --no-deps --upgrade --target "$SITE" . >/tmp/verify-pip.log 2>&1
   echo "pip exit $?" >>/tmp/verify-pip.log) &
  pip_pid=$!
  JOBS=8 scripts/gpu/fuzz.sh build || failed=1
  wait "$pip_pid"
  # (outside $OUT: fuzz.sh packs and removes the logs there when its build ends)
  grep -q "pip exit 0" /tmp/verify-pip.log || { tail -40 /tmp/verify-pip.log; failed=1; }
  note "build + package: $(( $(date +%s) - start )) s ($(tail -1 /tmp/verify-pip.log))"
fi

if [[ " $phases " == *" suite "* ]]; then
  TEST_TIMEOUT_S=${TEST_TIMEOUT_S:-300} scripts/gpu/fuzz.sh suite || failed=1
fi

if [[ " $phases " == *" python "* ]]; then
  start=$(date +%s)
  (cd /tmp && PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" timeout "${PYTEST_TIMEOUT_S:-420}" \
     python3 -X faulthandler -m pytest -q -rs -p no:cacheprovider "$ROOT/python/tests" >"$OUT/pytest.log" 2>&1)
  rc=$?
  note "pytest (every file, CUDA and CPU): exit $rc in $(( $(date +%s) - start )) s; $(tail -1 "$OUT/pytest.log")"
  grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -40 | tee -a "$summary"
  [ "$rc" = 0 ] || failed=1
fi

if [[ " $phases " == *" walk "* ]]; then
  scripts/gpu/fuzz.sh walk || failed=1
fi
if [[ " $phases " == *" sanitize "* ]]; then
  scripts/gpu/fuzz.sh sanitize || failed=1
fi
note "verify.sh $phases: $([ $failed = 0 ] && echo passed || echo FAILED)"
# The device tool brings back at most 8 files: everything but this summary in one archive.
archive=/tmp/verify-logs-${phases// /-}.tgz
(cd "$OUT" && tar czf "$archive" --exclude='verify-*' . && find . -mindepth 1 -maxdepth 1 ! -name 'verify-*' -exec rm -rf {} + && mv "$archive" .)
exit $failed
