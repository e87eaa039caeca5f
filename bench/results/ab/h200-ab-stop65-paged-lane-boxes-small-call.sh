# paged-lane-boxes-small (a paged tile of more than four boxes from two producer warps, a lane a
# box; fewer, larger boxes from one thread as on main) against main, one call (about 350 s):
# page 16 should keep paged-lane-boxes2's gain, pages 64 and 128 main's time. Here first:
#   git checkout main && scripts/ab_trees.sh -p paged-lane-boxes-small && git rev-parse --short HEAD > .commit
# (without the branch: mkdir .abp and copy prepared-paged-lane-boxes-small.patch there as paged-lane-boxes-small.patch)
# then run this file with carry [".deps", ".abp", ".commit"] (copy it into .abp/ so that it travels).
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O; R=$PWD
[ -d .fa4site ] && bash scripts/gpu/fa4_site.sh stash
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
# The mixed lengths (0.957 FA4) against the batch form of their longest: where main's warps
# wait (ncu's source page, bench/ncu_stalls.py), one launch each.
for s in varlen:4096,512,2048,37,8000,1500 8192; do
  n=${s%%:*}
  (cd /tmp && PYTHONPATH=/tmp/ab-pkg-base timeout 100 ncu --set full --import-source yes -f -o /tmp/st-$n \
     -k regex:prefill python3 $R/bench/profile_prefill.py 128 $s causal sm90 none 32/8) > $O/ncu-st-$n.log 2>&1
  ncu --import /tmp/st-$n.ncu-rep --page source --csv --print-source sass > /tmp/st-$n.csv 2>/dev/null
  ncu --import /tmp/st-$n.ncu-rep --page details --print-units base > $O/ncu-st-$n-details.txt 2>/dev/null
  python3 bench/ncu_stalls.py /tmp/st-$n.csv 128 > $O/stalls-$n.txt 2>&1
  echo "== stalls $s"; head -4 $O/stalls-$n.txt; grep -E "Duration|Issue Slots Busy|No Eligible|Active Warps Per|L2 Hit" $O/ncu-st-$n-details.txt | head -8; done; el stalls
(cd $OUT && tar czf c.tgz c)
# The torch operators on CUDA, bad inputs included, on main's package (outputs now sized from a
# metadata check; the run checks the rest).

(cd /tmp && PYTHONPATH=/tmp/ab-pkg-base timeout $(( 530 - ($(date +%s) - t0) )) python3 -X faulthandler -m pytest -q -rs -p no:cacheprovider \
   --rootdir $R $R/python/tests/test_gpu.py $R/python/tests/test_reliability.py $R/python/tests/test_catalogue.py \
   $R/python/tests/test_compat_gpu.py) > $O/pytest.log 2>&1
echo "pytest exit $?: $(tail -1 $O/pytest.log)"; grep -E "^(FAILED|ERROR)" $O/pytest.log | head; el pytest
rm -f $O/*/*.png; cd $OUT && tar czf c.tgz c && rm -rf c && ls -la c.tgz
