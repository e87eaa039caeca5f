#!/usr/bin/env bash
# Issue 26 on the GPU machine, from the repository root:
#   scripts/gpu/reliability.sh [all|install|test]    (all = install, then test)
# install builds and installs the package with the kernels these tests use (a few minutes);
# test runs, each logged under $OUT (a few minutes; each mode fits one 10-minute call):
#   1. the invalid-input catalogue on NumPy, torch CPU and torch CUDA, every case in a process
#      of its own (python/tests/test_catalogue.py; includes the four SIGSEGVs of the issue:
#      batch_mismatch, kv_heads_mismatch, last_dim_strided, decode_heads_mismatch);
#   2. python/tests/test_reliability.py: merge_states' non-finite rule on the combine kernel,
#      the smallest accepted softcap, no synchronisation with device index tensors (a
#      torch.cuda._sleep is still running when each call returns; check_inputs=True waits),
#      unchecked bad offsets / lengths / page indices completing without a fault;
#   3. the last of those under compute-sanitizer memcheck (every access checked);
#   4. test_gpu.py's error tests.
# Environment: REL_SKIP_INSTALL=1 makes `all` test the flashbuf already installed;
# REL_INSTANTIATIONS / REL_DECODE_INSTANTIATIONS / REL_ARCHS override the kernels built
# (default: bf16 D 128 prefill and decode, sm_90a). Summary in $OUT/summary.txt; exit status 0
# when every step passed.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/reliability-out}"
mkdir -p "$OUT"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
summary="$OUT/summary.txt"
: >"$summary"
status=0
step() {  # step NAME COMMAND...: runs, logs to $OUT/NAME.log, records the result
  local name=$1
  shift
  local t0=$SECONDS
  "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc, $((SECONDS - t0)) s; $(tail -1 "$OUT/$name.log")" | tee -a "$summary"
  [ $rc -eq 0 ] || status=1
}

mode="${1:-all}"
case "$mode" in all|install|test) ;; *) echo "usage: scripts/gpu/reliability.sh [all|install|test]" >&2; exit 2 ;; esac
if [ "$mode" = install ] || { [ "$mode" = all ] && [ "${REL_SKIP_INSTALL:-0}" != 1 ]; }; then
  export CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=${REL_INSTANTIATIONS:-bf16_128_128} \
-DFLASHBUF_DECODE_INSTANTIATIONS=${REL_DECODE_INSTANTIATIONS:-bf16_128} -DFLASHBUF_CUDA_ARCHS=${REL_ARCHS:-90a}"
  step install python3 -m pip install --no-build-isolation --no-deps -v .
fi
(cd /tmp && python3 -c "import flashbuf; print(flashbuf.build_info()); print('cuda_available', flashbuf.cuda_available())") \
  >"$OUT/build_info.txt" 2>&1
if [ "$mode" = install ]; then
  cat "$OUT/build_info.txt"
  exit $status
fi

# From /tmp, so that `import flashbuf` finds the installed package, not the source tree.
TESTS="$PWD/python/tests"
cd /tmp
step catalogue python3 -X faulthandler -m pytest "$TESTS/test_catalogue.py" -v -rs
step reliability python3 -X faulthandler -m pytest "$TESTS/test_reliability.py" -v -rs
if command -v compute-sanitizer >/dev/null; then
  step memcheck compute-sanitizer --tool memcheck --error-exitcode 9 --target-processes all \
    python3 -m pytest "$TESTS/test_reliability.py" -q -k "unchecked_bad_device_indices or merge_states"
else
  echo "memcheck: skipped, no compute-sanitizer" | tee -a "$summary"
fi
step gpu_errors python3 -X faulthandler -m pytest "$TESTS/test_gpu.py" -v -rs -k "error"
# The catalogue's CUDA results, one JSON line per case, for the record.
python3 "$TESTS/catalogue.py" cuda >"$OUT/catalogue_cuda.jsonl" 2>"$OUT/catalogue_cuda.stderr"
echo "overall: $([ $status -eq 0 ] && echo PASS || echo FAIL)" | tee -a "$summary"
exit $status
