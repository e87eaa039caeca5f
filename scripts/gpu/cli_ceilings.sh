#!/usr/bin/env bash
# On the GPU machine, from the repository root: builds the command line with CUDA (two prefill
# instantiations, one decode, sm_90a: a few minutes on 16 cores) and shows, with logs in $OUT:
#   - `flashbuf info` / `--version`, and the CLI conventions (tests/cli/conventions.sh);
#   - `flashbuf run` on the GPU, its ceilings measured on this GPU (cuBLAS GEMM, read, copy);
#   - `flashbuf bench --quick` on the GPU: the table as rows finish, progress lines on a pipe,
#     and JSON with meta.ceilings from this GPU;
#   - the host tests of the no-usable-GPU messages (they skip here: a GPU is present) and of
#     build_info and the version macros.
# Needs oneDNN, CLI11 and nlohmann/json: installed, or carried as .deps/debs
# (scripts/gpu/device_deps.sh download, here) and unpacked there.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
status=0
step() { echo; echo "=== $* ($(date +%T))"; }

source scripts/gpu/device_deps.sh unpack
step configure
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv | tee "$OUT/gpu.txt"
cmake -S . -B build-cli-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHBUF_ENABLE_CUDA=ON \
  -DFLASHBUF_CUDA_ARCHS=90a -DFLASHBUF_INSTANTIATIONS="bf16_64_64;bf16_128_128" \
  -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128 -DFLASHBUF_BUILD_TESTS=ON 2>&1 | tee "$OUT/configure.log" | grep -E "flashbuf|Warning|Error"
step build
start=$(date +%s)
cmake --build build-cli-gpu -j"$(nproc)" --target flashbuf_cli flashbuf_host_tests >"$OUT/build.log" 2>&1 ||
  { grep -E "error" -A5 "$OUT/build.log" | head -40; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
CLI=build-cli-gpu/flashbuf

step info
$CLI --version | tee "$OUT/info.txt"
$CLI info | tee -a "$OUT/info.txt"
ldd "$CLI" | grep -E "cublas|cudart" | tee -a "$OUT/info.txt"

step conventions
sh tests/cli/conventions.sh "$CLI" 2>&1 | tee "$OUT/conventions.txt" || status=1

step "run (GPU)"
$CLI run --backend gpu 2>&1 | tee "$OUT/run.txt" || status=1

step "bench --quick (GPU), stderr to a file: progress lines without a terminal"
$CLI bench --backend gpu --quick --out "$OUT/bench-quick.json" >"$OUT/bench-table.txt" 2>"$OUT/bench-progress.txt" || status=1
cat "$OUT/bench-table.txt"
echo "--- progress lines (stderr):"
head -5 "$OUT/bench-progress.txt"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); m=d['meta']; print('JSON rows', len(d['rows']), 'ceilings', m['ceilings'], 'from properties', m.get('ceilings_from_properties'))" "$OUT/bench-quick.json" || status=1

step "host tests: no-usable-GPU messages, build_info, version"
build-cli-gpu/tests/flashbuf_host_tests --gtest_filter='NoUsableGpu*:BuildInfo*:Version*' 2>&1 | tail -12 | tee "$OUT/host_tests.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo
echo "cli_ceilings: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
