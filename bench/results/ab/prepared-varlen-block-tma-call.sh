# Prepared at stop 59 for the next GPU time: varlen-block-tma (the block per item takes a varlen
# batch's Q and O by TMA) against main, one call. Here first:
#   git checkout main && scripts/ab_trees.sh -p varlen-block-tma && git rev-parse --short HEAD > .commit
# (the base tree is tested too: main f281b8a, whose varlen walks have not run on a GPU)
# then run this file with carry [".deps", ".abp", ".commit"] (copy it into .abp/ so that it travels).
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O
source scripts/gpu/device_deps.sh unpack >/dev/null
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128" AB_TEST_CMAKE_ARGS=""
bash scripts/gpu/trees_from_patches.sh base varlen-block-tma >/dev/null; T=/root/ab
timeout 300 env GPU_TESTS='*' TEST_SHARDS=16 TEST_TIMEOUT_S=150 AB_TEST_TREES="base varlen-block-tma" AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/s scripts/gpu_ab.sh $T/base $T/varlen-block-tma -- --serving --serving-cases varlen > $O/ab-serving.log 2>&1
grep -A3 "tests:" $O/ab-serving.log; grep -A 8 "varlen-block-tma / base" $O/ab-serving.log; el serving
timeout 150 env AB_SKIP_BUILD=1 AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/v scripts/gpu_ab.sh $T/base $T/varlen-block-tma -- --prefill --backend sm90 --prefill-varlen --d 64,128 --s 4096,8192,16384 --causal both --target-ms 4 --anchors none > $O/ab-varlen.log 2>&1
grep -A 16 "varlen-block-tma / base" $O/ab-varlen.log; el varlen
rm -f $O/*/*.png; (cd $OUT && tar czf c.tgz c)
B=$T/varlen-block-tma/build-ab/tests/flashbuf_gpu_tests
[ -x $B ] && echo "grid3: $(FLASHBUF_PREFILL_GRID=3 timeout 50 scripts/gpu_tests_sharded.sh $B '*Varlen*:*Fuzz*:*Sinks*:*Sanitizer*' 16 45 $O/grid3.log 2>&1 | tail -1)"; el grid3
# The small cases' varlen batch walks the persistent grid by default; FLASHBUF_PREFILL_GRID=off
# puts it on the block per item, the path this branch changes.
for grid in default off; do for tool in memcheck racecheck; do
  env $([ $grid = off ] && echo FLASHBUF_PREFILL_GRID=off) timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 $B \
    --gtest_filter='Kernels/PrefillGpu.SanitizerSmallCases/sm90' --gtest_brief=1 > $O/san-$grid-$tool.log 2>&1
  echo "grid $grid $tool exit $?"; done; done; el san
cd $OUT && tar czf c.tgz c && rm -rf c && ls -la c.tgz
