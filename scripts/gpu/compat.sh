#!/usr/bin/env bash
# The drop-ins of issue 28 on the GPU machine (an H200): builds and installs the Python package
# with only the kernels the tests need, puts FlashAttention 4 on the path when its wheels were
# carried (../shared/anchors/fa4/), and runs the compatibility tests: flashbuf.flash_attn against
# the float64 reference and flash_attn.cute, flash_attn_with_kvcache's append, decode path and
# CUDA-graph capture, merge_states of attention's outputs on CUDA, and tiny transformers models
# in bf16 with attn_implementation="flashbuf" against "sdpa" (plus the CPU tests of the same).
#
#   scripts/gpu/compat.sh [all|build|test]      # default all; logs and results in $OUT
#
# FA4 (optional): `bash scripts/gpu/fa4_site.sh pack` here, then carry one .fa4site part per
# call (with .fa4site/SHA256SUMS); the call that brings the last one finishes the install.
# Without FA4 its comparisons skip, visibly.
# Fits one 10-minute call: the build takes 2-4 minutes on 16 cores, the tests 1-3; with
# `build` and `test` as two calls on a warm machine the second reuses the first's install.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
what=${1:-all}
summary="$OUT/summary.txt"
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }

# Only what the tests use: bf16 prefill at D 64 (the transformers models) and 128, bf16 decode
# at the same head dims, Hopper only.
export CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_64;bf16_128 -DFLASHBUF_CUDA_ARCHS=90a"
export CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)

{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)"
  python3 -c "import transformers; print('transformers', transformers.__version__)" 2>&1 | tail -1
} | tee -a "$summary"

if [ "$what" = all ] || [ "$what" = build ]; then
  start=$(date +%s)
  timeout 420 python3 -m pip install -v --no-build-isolation --no-deps "$ROOT" >"$OUT/build.log" 2>&1
  rc=$?
  say "build and install: exit $rc in $(( $(date +%s) - start )) s ($CMAKE_ARGS)"
  if [ $rc -ne 0 ]; then grep -E "error|Error" -A5 "$OUT/build.log" | head -40; exit 1; fi
fi
[ "$what" = build ] && exit 0

# FlashAttention 4 from the carried parts, if any (scripts/gpu/fa4_site.sh; flash_attn.cute's
# tests skip without it).
eval "$(bash scripts/gpu/fa4_site.sh env 2>>"$OUT/build.log")"
say "FA4: $(python3 -c 'import flash_attn.cute; print("importable")' 2>&1 | tail -1)"

# From outside the repository, so that `import flashbuf` is the installed package.
cd "$OUT"
export PYTHONUNBUFFERED=1 FLASHBUF_TEST_TRACE=1
tests="$ROOT/python/tests"
timeout 420 python3 -X faulthandler -m pytest -v -rs -p no:cacheprovider --rootdir "$ROOT" \
  --junitxml="$OUT/junit.xml" \
  "$tests/test_compat_gpu.py" "$tests/test_gpu.py::test_merge_states_cuda" \
  "$tests/test_flash_attn_cpu.py" "$tests/test_transformers_cpu.py" \
  "$tests/test_cpu.py" "$tests/test_torch_cpu.py" >"$OUT/pytest.log" 2>&1
rc=$?
say "pytest: exit $rc; $(tail -1 "$OUT/pytest.log")"
grep -E "^(FAILED|ERROR)|^SKIPPED" "$OUT/pytest.log" | head -40 | tee -a "$summary"
exit $rc
