# Stop 60: paged TMA boxes prefetched into L2 two / one tiles ahead, against main.
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O
source scripts/gpu/device_deps.sh unpack >/dev/null
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128;bf16_256_256 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128" AB_TEST_CMAKE_ARGS=""
bash scripts/gpu/trees_from_patches.sh base paged-l2-prefetch paged-l2-prefetch1 >/dev/null; T=/root/ab
timeout 330 env GPU_TESTS='*Paged*:*Sanitizer*:*Fuzz*' TEST_SHARDS=16 TEST_TIMEOUT_S=150 AB_TEST_TREES="paged-l2-prefetch" AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/s scripts/gpu_ab.sh $T/base $T/paged-l2-prefetch $T/paged-l2-prefetch1 -- --serving --serving-cases paged > $O/ab-serving.log 2>&1
grep -A3 "tests:" $O/ab-serving.log; grep -A 14 " / base" $O/ab-serving.log; el serving
(cd $OUT && tar czf c.tgz c)
timeout 170 env AB_SKIP_BUILD=1 AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/p scripts/gpu_ab.sh $T/base $T/paged-l2-prefetch $T/paged-l2-prefetch1 -- --prefill --prefill-page 16 --d 64,128,256 --s 1024,4096 --target-ms 4 --anchors none > $O/ab-paged.log 2>&1
grep -A 14 " / base" $O/ab-paged.log; el paged
B=$T/paged-l2-prefetch/build-ab/tests/flashbuf_gpu_tests
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $B --gtest_filter='Kernels/PrefillGpu.PagedRowsWithoutKeysAreNeverRead/sm90:Kernels/PrefillGpu.SanitizerSmallCases/sm90' --gtest_brief=1 > $O/san-$tool.log 2>&1
  echo "$tool exit $?"; done; el san
rm -f $O/*/*.png; cd $OUT && tar czf c.tgz c && rm -rf c && ls -la c.tgz
