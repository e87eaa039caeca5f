#!/usr/bin/env bash
# The GPU machine's steps, each fitting one call of at most 10 minutes:
#   bench/gpu.sh install          build and install the package (CUDA kernels for sm_90a + sm_80)
#   bench/gpu.sh test             the Python tests, GPU ones included (pytest -v; see gpu_pytest.sh)
#   bench/gpu.sh bench [ARGS...]  bench/bench.py ARGS (results and plot into $OUT)
#   bench/gpu.sh all [ARGS...]    the three in turn
# Expects python3 with torch, scikit-build-core and nanobind installed (no network needed).
# Set FLASHBUF_COMMIT to the commit being measured where the copy has no .git.
set -euo pipefail
cd "$(dirname "$0")/.."
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"

step_install() {
  python3 -m pip install --no-build-isolation --no-deps -v . 2>&1 | grep -E "^(--|\[|Successfully|ERROR|error)" | tail -40
  (cd /tmp && python3 -c "import flashbuf; print(flashbuf.build_info()); print('cuda_available', flashbuf.cuda_available())")
}
# -v and -X faulthandler: a crash names its test (bench/gpu_pytest.sh runs one file per process).
step_test() { FLASHBUF_TEST_TRACE=1 python3 -X faulthandler -m pytest python/tests -v -rs "$@"; }
step_bench() { python3 bench/bench.py "$@"; }

cmd="${1:-all}"
shift || true
case "$cmd" in
  install) step_install ;;
  test) step_test "$@" ;;
  bench) step_bench "$@" ;;
  all) step_install && step_test && step_bench "$@" ;;
  *) echo "usage: bench/gpu.sh install|test|bench|all [ARGS...]" >&2; exit 2 ;;
esac
