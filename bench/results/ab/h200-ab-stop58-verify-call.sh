t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
source scripts/gpu/device_deps.sh unpack >/dev/null
cmake -S . -B /root/bv -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHBUF_ENABLE_CUDA=ON -DFLASHBUF_CUDA_ARCHS=90a -DFLASHBUF_BUILD_PYTHON=OFF "-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_96_96;bf16_128_128;bf16_256_256" -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128 >/dev/null && cmake --build /root/bv -j16 --target flashbuf_gpu_tests > $OUT/build.log 2>&1; echo "build $?"; el build
B=/root/bv/tests/flashbuf_gpu_tests
FLASHBUF_PREFILL_GRID=3 timeout 100 scripts/gpu_tests_sharded.sh $B '*Sinks*:*Varlen*:*Persistent*:*Fuzz*' 16 95 $OUT/grid3.log 2>&1 | tail -1; el grid3
for tool in memcheck racecheck; do timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 $B --gtest_filter='Kernels/PrefillGpu.SanitizerSmallCases/sm90' --gtest_brief=1 > $OUT/$tool.log 2>&1; echo "$tool exit $?"; done; el san
