# paged-lane-boxes-small (a paged tile of more than four boxes from two producer warps, a lane a
# box; fewer, larger boxes from one thread as on main) against main, one call (about 350 s):
# page 16 should keep paged-lane-boxes2's gain, pages 64 and 128 main's time. Here first:
#   git checkout main && scripts/ab_trees.sh -p paged-lane-boxes-small && git rev-parse --short HEAD > .commit
# (without the branch: mkdir .abp and copy prepared-paged-lane-boxes-small.patch there as paged-lane-boxes-small.patch)
# then run this file with carry [".deps", ".abp", ".commit"] (copy it into .abp/ so that it travels).
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O
source scripts/gpu/device_deps.sh unpack >/dev/null
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128;bf16_256_256 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
L=paged-lane-boxes-small
bash scripts/gpu/trees_from_patches.sh base $L >/dev/null; T=/root/ab
timeout 300 env GPU_TESTS='*Paged*:*Sanitizer*:*Fuzz*:*Sinks*:*AppendKv*' TEST_SHARDS=16 TEST_TIMEOUT_S=150 AB_TEST_TREES="$L" AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/s scripts/gpu_ab.sh $T/base $T/$L -- --serving --serving-cases paged > $O/ab-serving.log 2>&1
grep -A3 "tests:" $O/ab-serving.log; grep -A 10 " / base" $O/ab-serving.log; el serving
(cd $OUT && tar czf c.tgz c)
for pg in 16 128; do
  timeout 60 env AB_SKIP_BUILD=1 AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/p$pg scripts/gpu_ab.sh $T/base $T/$L -- --prefill --prefill-page $pg --d 64,128,256 --s 1024,4096 --target-ms 4 --anchors none > $O/ab-paged$pg.log 2>&1
  grep -A 13 " / base" $O/ab-paged$pg.log; el paged $pg; done
(cd $OUT && tar czf c.tgz c)
B=$T/$L/build-ab/tests/flashbuf_gpu_tests
for tool in memcheck racecheck synccheck; do
  timeout 35 compute-sanitizer --tool $tool --error-exitcode 9 $B --gtest_filter='Kernels/PrefillGpu.SanitizerSmallCases/sm90' --gtest_brief=1 > $O/san-$tool.log 2>&1
  echo "$L $tool exit $?"; done
timeout 30 compute-sanitizer --tool memcheck --error-exitcode 9 $B --gtest_filter='AppendKvGpu.*' --gtest_brief=1 > $O/san-append.log 2>&1
echo "AppendKvGpu memcheck exit $?"; el san
# The torch operators on CUDA, bad inputs included, on main's package (outputs now sized from a
# metadata check; the run checks the rest).
R=$PWD
(cd /tmp && PYTHONPATH=/tmp/ab-pkg-base timeout 150 python3 -X faulthandler -m pytest -q -rs -p no:cacheprovider \
   --rootdir $R $R/python/tests/test_gpu.py $R/python/tests/test_reliability.py $R/python/tests/test_catalogue.py \
   $R/python/tests/test_compat_gpu.py) > $O/pytest.log 2>&1
echo "pytest exit $?: $(tail -1 $O/pytest.log)"; grep -E "^(FAILED|ERROR)" $O/pytest.log | head; el pytest
# The Python entry points' time per decode step on CUDA: the session-start Python files
# (.abp/old-py: operators through the dispatcher, the append without its outside-write mask)
# against the working tree's, on main's package, alternating, twice.
rm -rf /tmp/ab-pkg-old && cp -r /tmp/ab-pkg-base /tmp/ab-pkg-old && cp .abp/old-py/*.py /tmp/ab-pkg-old/flashbuf/
for r in 1 2; do for t in old base; do
  (cd /tmp && PYTHONPATH=/tmp/ab-pkg-$t timeout 40 python3 $R/bench/host_overhead.py --device cuda --calls 500 --rounds 3) > $O/host-$t-$r.log 2>&1
  echo "== $t $r"; cat $O/host-$t-$r.log | tail -4; done; done; el host
rm -f $O/*/*.png; cd $OUT && tar czf c.tgz c && rm -rf c && ls -la c.tgz
