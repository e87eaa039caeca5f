# persistent-paged (short paged items on the persistent Hopper grid) against main, one call
# (about 400 s): the branch's GPU tests (paged, persistent, sanitizer, sinks, fuzz; again with
# FLASHBUF_PREFILL_GRID=3), compute-sanitizer on the small cases and the new test, then the A/B
# over the paged prefill grid (pages 16 and 64) and the serving grid's paged rows.
# carry [".deps", ".abp", ".commit"]; run as: bash .abp/call.sh
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O; R=$PWD
source scripts/gpu/device_deps.sh unpack >/dev/null
nvidia-smi --query-gpu=name --format=csv,noheader
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128;bf16_256_256 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
export AB_TEST_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128;bf16_256_256;fp16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
L=persistent-paged
bash scripts/gpu/trees_from_patches.sh base $L >/dev/null; T=/root/ab
timeout 330 env GPU_TESTS='*Paged*:*Persistent*:*Sanitizer*:*Fuzz*:*Sinks*:*Decode*' TEST_SHARDS=16 TEST_TIMEOUT_S=150 AB_TEST_TREES="$L" AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/p16 scripts/gpu_ab.sh $T/base $T/$L -- --prefill --prefill-page 16 --d 64,128,256 --s 512,1024,2048,4096 --target-ms 4 --anchors none > $O/ab-paged16.log 2>&1
grep -A4 "tests:" $O/ab-paged16.log; grep -B2 -A 20 " / base" $O/ab-paged16.log | tail -22; el paged16
(cd $OUT && tar czf c.tgz c)
B=$T/$L/build-ab/tests/flashbuf_gpu_tests
if [ -x $B ]; then
  res=$(FLASHBUF_PREFILL_GRID=3 scripts/gpu_tests_sharded.sh $B '*Paged*:*Persistent*' 16 100 $O/tests-grid3.log); echo "grid=3 tests: ${res##*$'\n'}"; el grid3
  for tool in memcheck racecheck synccheck; do
    timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 $B --gtest_filter='Kernels/PrefillGpu.SanitizerSmallCases/sm90' --gtest_brief=1 > $O/san-$tool.log 2>&1; echo "$tool exit $?"
    [ $tool = synccheck ] || { FLASHBUF_PREFILL_GRID=2 timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 $B --gtest_filter='Kernels/PrefillGpu.SanitizerSmallCases/sm90' --gtest_brief=1 > $O/san-walk-$tool.log 2>&1; echo "walk $tool exit $?"; }
  done
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B --gtest_filter='Kernels/PrefillGpu.PagedItemsWithoutKeysOnThePersistentGrid/sm90' --gtest_brief=1 > $O/san-nokeys.log 2>&1; echo "no-keys memcheck exit $?"; el san
fi
(cd $OUT && tar czf c.tgz c)
timeout 70 env AB_SKIP_BUILD=1 AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/srv scripts/gpu_ab.sh $T/base $T/$L -- --serving --serving-cases paged > $O/ab-serving.log 2>&1
grep -B2 -A 12 " / base" $O/ab-serving.log | tail -14; el serving
timeout 50 env AB_SKIP_BUILD=1 AB_INTERLEAVE=1 AB_ROUNDS=2 OUT=$O/p64 scripts/gpu_ab.sh $T/base $T/$L -- --prefill --prefill-page 64 --d 64,128,256 --s 1024,4096 --target-ms 4 --anchors none > $O/ab-paged64.log 2>&1
grep -B2 -A 16 " / base" $O/ab-paged64.log | tail -16; el paged64
(cd $OUT && tar czf c.tgz c)
