# Stop 60: paged page 16 (TMA boxes of 2 KB) against pages of 64: entries-first, gather16, main.
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O
source scripts/gpu/device_deps.sh unpack >/dev/null
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128" AB_TEST_CMAKE_ARGS=""
bash scripts/gpu/trees_from_patches.sh base paged-entries-first paged-gather16 >/dev/null; T=/root/ab
timeout 330 env GPU_TESTS='*Paged*:*Sanitizer*:*Fuzz*' TEST_SHARDS=16 TEST_TIMEOUT_S=150 AB_TEST_TREES="paged-entries-first" AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/s scripts/gpu_ab.sh $T/base $T/paged-entries-first $T/paged-gather16 -- --serving --serving-cases paged > $O/ab-serving.log 2>&1
grep -A3 "tests:" $O/ab-serving.log; grep -A 12 " / base" $O/ab-serving.log; el serving
(cd $OUT && tar czf c.tgz c)
timeout 170 env AB_SKIP_BUILD=1 AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/p scripts/gpu_ab.sh $T/base $T/paged-entries-first $T/paged-gather16 -- --prefill --prefill-page 16 --d 64,128 --s 1024,4096 --target-ms 4 --anchors none > $O/ab-paged.log 2>&1
grep -A 12 " / base" $O/ab-paged.log; el paged
B=$T/paged-entries-first/build-ab/tests/flashbuf_gpu_tests
for tool in memcheck racecheck; do
  timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 $B --gtest_filter='*Paged*Never*:Kernels/PrefillGpu.SanitizerSmallCases/sm90' --gtest_brief=1 > $O/san-$tool.log 2>&1
  echo "$tool exit $?"; done; el san
rm -f $O/*/*.png; cd $OUT && tar czf c.tgz c && rm -rf c && ls -la c.tgz
