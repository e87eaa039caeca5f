#!/usr/bin/env bash
# The CPU backend on the GPU machine: proves the CUDA build still builds and imports with oneDNN
# carried in (the machine cannot install packages), runs the CPU Python tests, and runs the CPU
# benchmark against torch SDPA on that machine's CPU (quieter than the 2-core development
# machine), at torch's default thread count and at 2 threads. Logs and results under $OUT.
#
# Before `run`, here:  scripts/gpu/device_deps.sh download      then carry [".deps/debs"]
# (device_deps.sh is main's: oneDNN, its OpenCL loader and the CLI's header libraries.)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
source scripts/gpu/device_deps.sh unpack
SITE=/tmp/flashbuf-cpu-site
CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128 -DFLASHBUF_CUDA_ARCHS=90a" \
  CMAKE_BUILD_PARALLEL_LEVEL=16 python3 -m pip install --no-build-isolation --no-deps --target "$SITE" . \
  > "$OUT/pip.log" 2>&1 || { tail -40 "$OUT/pip.log"; exit 1; }
cd /tmp
PYTHONPATH="$SITE" python3 -c "import flashbuf; print(flashbuf.build_info())" | tee "$OUT/build_info.txt"
PYTHONPATH="$SITE" python3 -m pytest -q "$ROOT/python/tests/test_cpu.py" "$ROOT/python/tests/test_torch_cpu.py" \
  "$ROOT/python/tests/test_cpu_threads.py" > "$OUT/pytest_cpu.log" 2>&1 && echo "CPU tests passed" || { tail -30 "$OUT/pytest_cpu.log"; exit 1; }
lscpu > "$OUT/lscpu.txt"
PYTHONPATH="$SITE" python3 "$ROOT/bench/bench_cpu.py" --repeats 9 --out "$OUT/cpu-h200host-default-threads.json" | tail -11
PYTHONPATH="$SITE" python3 "$ROOT/bench/bench_cpu.py" --repeats 9 --threads 2 --out "$OUT/cpu-h200host-2-threads.json" | tail -11
