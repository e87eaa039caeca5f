#!/usr/bin/env bash
# The Python tests on the GPU machine, one test file per process, verbose and with faulthandler
# on from interpreter start, so that a hard crash (segmentation fault) names its test:
#   - pytest -v prints (and flushes) each test id before the test runs;
#   - FLASHBUF_TEST_TRACE=1 makes python/tests/conftest.py write "[flashbuf-test] start <id>" /
#     "done <id>" to stderr unbuffered, and "session finished" at the end (a crash after that
#     line happened at interpreter exit, not in a test);
#   - -X faulthandler keeps the Python stacks of all threads on a fatal signal, also during
#     collection and at exit (pytest's own faulthandler covers only the session).
# A crashed file does not stop the others; the summary lists each file's exit status (139 =
# SIGSEGV, 134 = SIGABRT). Extra arguments go to every pytest call (e.g. -x, -k decode).
#
#   bench/gpu_pytest.sh                 # every python/tests/test_*.py
#   bench/gpu_pytest.sh -k graph        # a subset
#   FILES="test_gpu.py" bench/gpu_pytest.sh
#
# Tests the installed flashbuf package (bench/gpu.sh install); the repository has no importable
# flashbuf at its root, so `import flashbuf` finds the installed one.
set -uo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
export PYTHONUNBUFFERED=1 FLASHBUF_TEST_TRACE=1
files="${FILES:-$(cd python/tests && ls test_*.py)}"
status=0
summary=""
for f in $files; do
  echo "=== python/tests/$f ==="
  python3 -X faulthandler -m pytest -v -rs -p no:cacheprovider --rootdir "$root" "$root/python/tests/$f" "$@"
  rc=$?
  case $rc in
    0|5) ;;  # passed, or nothing collected / all deselected
    *) status=1 ;;
  esac
  summary+="$(printf '%-24s exit %s' "$f" "$rc")"$'\n'
done
echo "=== summary ==="
printf '%s' "$summary"
exit $status
