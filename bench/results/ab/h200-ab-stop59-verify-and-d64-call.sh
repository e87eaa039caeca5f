# Stop 59 call B: main's verification (every GPU test, the 3-block walk, sanitizers, the Python
# GPU tests) and the d64-after-scaling A/B (D 64, S 1k-16k, both masks, interleaved, 3 rounds).
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O
source scripts/gpu/device_deps.sh unpack >/dev/null
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128" AB_TEST_CMAKE_ARGS=""
bash scripts/gpu/trees_from_patches.sh base d64-after-scaling >/dev/null; T=/root/ab
timeout 330 env GPU_TESTS='*' TEST_SHARDS=16 TEST_TIMEOUT_S=150 AB_TEST_TREES="base d64-after-scaling" AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/p scripts/gpu_ab.sh $T/base $T/d64-after-scaling -- --prefill --backend sm90 --d 64 --s 1024,2048,4096,8192,16384 --causal both --target-ms 4 --anchors none > $O/ab.log 2>&1
grep -A3 "tests:" $O/ab.log; grep -A 16 "d64-after-scaling / base" $O/ab.log | tail -12; el ab
rm -f $O/p/*.png; (cd $OUT && tar czf c.tgz c)
for n in base d64-after-scaling; do B=$T/$n/build-ab/tests/flashbuf_gpu_tests
  [ -x $B ] && echo "$n grid3: $(FLASHBUF_PREFILL_GRID=3 timeout 50 scripts/gpu_tests_sharded.sh $B '*PrefillGpu.*/sm90:*PrefillHeadDims.*/sm90_*:*Varlen*:*Fuzz*:*Sinks*' 16 45 $O/grid3-$n.log 2>&1 | tail -1)"; done; el grid3
(cd $T/base && PYTHONPATH=/tmp/ab-pkg-base FILES="test_gpu.py test_compat_gpu.py test_reliability.py test_sinks.py" timeout 120 bench/gpu_pytest.sh -q > $O/pytest.log 2>&1; tail -6 $O/pytest.log; grep -E 'passed|failed' $O/pytest.log | tail -4); el pytest
B=$T/base/build-ab/tests/flashbuf_gpu_tests
for tool in memcheck racecheck synccheck; do
  timeout 50 compute-sanitizer --tool $tool --error-exitcode 9 $B --gtest_filter='*Sanitizer*:BuffersRoundTrip.*:WgmmaBuffers.*' --gtest_brief=1 > $O/san-$tool.log 2>&1; echo "base $tool exit $?"
  [ $tool = synccheck ] || FLASHBUF_PREFILL_GRID=2 timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 $B --gtest_filter='Kernels/PrefillGpu.SanitizerSmallCases/sm90' --gtest_brief=1 > $O/san-walk-$tool.log 2>&1; echo "base walk $tool exit $?"
done; el san
B=$T/d64-after-scaling/build-ab/tests/flashbuf_gpu_tests
for tool in memcheck; do timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 $B --gtest_filter='Kernels/PrefillGpu.SanitizerSmallCases/sm90' --gtest_brief=1 > $O/san-d64-$tool.log 2>&1; echo "d64 $tool exit $?"; done; el san-d64
rm -f $O/p/*.png; cd $OUT && tar czf c.tgz c && rm -rf c && ls -la c.tgz
