# persistent-cache (the persistent walk for a batch-form K/V cache with seqlens_k too; the paged
# walk's producer compiled once per form) against main, one call (about 400 s). Here first:
#   git checkout main && mkdir -p .abp && rm -f .abp/*.patch .abp/*.commit &&
#   cp bench/results/ab/prepared-persistent-cache.patch .abp/persistent-cache.patch &&
#   git rev-parse --short HEAD | tee .abp/base.commit .abp/persistent-cache.commit .commit &&
#   cp bench/results/ab/prepared-persistent-cache-call.sh .abp/call.sh
# then run `bash .abp/call.sh` with carry [".deps", ".abp", ".commit"].
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O; R=$PWD
source scripts/gpu/device_deps.sh unpack >/dev/null
nvidia-smi --query-gpu=name --format=csv,noheader
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128;bf16_256_256 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
export AB_TEST_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128;bf16_256_256;fp16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
L=persistent-cache
bash scripts/gpu/trees_from_patches.sh base $L >/dev/null; T=/root/ab
# The new K/V form, both trees: main keeps a block per item for a cache with seqlens_k.
timeout 330 env GPU_TESTS='*Paged*:*Persistent*:*Sanitizer*:*SeqlensK*:*Cache*:*Fuzz*:*Sinks*:*Varlen*' TEST_SHARDS=16 TEST_TIMEOUT_S=150 AB_TEST_TREES="$L" AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/cache scripts/gpu_ab.sh $T/base $T/$L -- --prefill --prefill-cache --d 64,128,256 --s 512,1024,2048,4096 --target-ms 4 --anchors none > $O/ab-cache.log 2>&1
grep -A4 "tests:" $O/ab-cache.log; tail -26 $O/ab-cache.log; el cache
(cd $OUT && tar czf c.tgz c)
B=$T/$L/build-ab/tests/flashbuf_gpu_tests
if [ -x $B ]; then
  res=$(FLASHBUF_PREFILL_GRID=3 scripts/gpu_tests_sharded.sh $B '*Paged*:*Persistent*:*SeqlensK*:*Cache*' 16 100 $O/tests-grid3.log); echo "grid=3 tests: ${res##*$'\n'}"; el grid3
  for tool in memcheck racecheck synccheck; do
    timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 $B --gtest_filter='Kernels/PrefillGpu.SanitizerSmallCases/sm90' --gtest_brief=1 > $O/san-$tool.log 2>&1; echo "$tool exit $?"
  done
  timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $B --gtest_filter='Kernels/PrefillGpu.CacheItemsWithoutKeysOnThePersistentGrid/sm90:Kernels/PrefillGpu.SeqlensKRowsPastTheEndAreNeverRead/sm90' --gtest_brief=1 > $O/san-cache.log 2>&1; echo "cache memcheck exit $?"; el san
fi
(cd $OUT && tar czf c.tgz c)
# The paged walk after its producer was split per form: level with main expected.
timeout 60 env AB_SKIP_BUILD=1 AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/p16 scripts/gpu_ab.sh $T/base $T/$L -- --prefill --prefill-page 16 --d 64,128,256 --s 512,1024,2048 --target-ms 4 --anchors none > $O/ab-paged16.log 2>&1
tail -20 $O/ab-paged16.log; el paged16
(cd $OUT && tar czf c.tgz c)
