# Prepared at stop 60 for the next GPU time: paged-lane-boxes (a paged tile's TMA boxes issued by
# a whole producer warp, a lane a box) and paged-lane-boxes2 (the same over two warps an
# operand) against main, one call (about 500 s). Here first:
#   git checkout main && scripts/ab_trees.sh -p paged-lane-boxes paged-lane-boxes2 && git rev-parse --short HEAD > .commit
# then run this file with carry [".deps", ".abp", ".commit"] (copy it into .abp/ so that it travels).
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O
source scripts/gpu/device_deps.sh unpack >/dev/null
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128;bf16_256_256 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
# (The tests build the same instantiations: two test builds beside three packages must leave
# the benchmarks their time within the call's 600 s.)
L1=paged-lane-boxes L2=paged-lane-boxes2
bash scripts/gpu/trees_from_patches.sh base $L1 $L2 >/dev/null; T=/root/ab
timeout 380 env GPU_TESTS='*Paged*:*Sanitizer*:*Fuzz*:*Sinks*' TEST_SHARDS=16 TEST_TIMEOUT_S=150 AB_TEST_TREES="$L1 $L2" AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/s scripts/gpu_ab.sh $T/base $T/$L1 $T/$L2 -- --serving --serving-cases paged > $O/ab-serving.log 2>&1
grep -A3 "tests:" $O/ab-serving.log; grep -A 14 " / base" $O/ab-serving.log; el serving
(cd $OUT && tar czf c.tgz c)
timeout 110 env AB_SKIP_BUILD=1 AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/p scripts/gpu_ab.sh $T/base $T/$L1 $T/$L2 -- --prefill --prefill-page 16 --d 64,128,256 --s 1024,4096 --target-ms 4 --anchors none > $O/ab-paged.log 2>&1
grep -A 14 " / base" $O/ab-paged.log; el paged
(cd $OUT && tar czf c.tgz c)
for t in $L2 $L1; do B=$T/$t/build-ab/tests/flashbuf_gpu_tests
  for tool in memcheck racecheck synccheck; do
    [ $t = $L1 ] && [ $tool != memcheck ] && continue
    timeout 35 compute-sanitizer --tool $tool --error-exitcode 9 $B --gtest_filter='Kernels/PrefillGpu.SanitizerSmallCases/sm90' --gtest_brief=1 > $O/san-$t-$tool.log 2>&1
    echo "$t $tool exit $?"; done; done
B=$T/$L2/build-ab/tests/flashbuf_gpu_tests
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B --gtest_filter='Kernels/PrefillGpu.PagedRowsWithoutKeysAreNeverRead/sm90' --gtest_brief=1 > $O/san-$L2-never-read.log 2>&1
echo "$L2 memcheck never-read exit $?"; el san
R=$PWD
# The CUDA Python tests of the sinks and the drop-ins on main's package (its bf16 D 64/128/256
# prefill and D 128 decode: what these files use).
(cd /tmp && PYTHONPATH=/tmp/ab-pkg-base timeout 80 python3 -X faulthandler -m pytest -q -rs -p no:cacheprovider \
   --rootdir $R $R/python/tests/test_sinks.py $R/python/tests/test_compat_gpu.py) > $O/pytest.log 2>&1
echo "pytest exit $?: $(tail -1 $O/pytest.log)"; grep -E "^(FAILED|ERROR)" $O/pytest.log | head; el pytest
(cd $OUT && tar czf c.tgz c)
# Stop 61's question on the serving grid's six mixed lengths (0.957 FA4): does the walk's
# longest-first order cost L2 hits? L2 hit rate and DRAM bytes of main's kernel on that batch
# and on the batch form of its longest length (same heads), one launch each.
for s in varlen:4096,512,2048,37,8000,1500 8192; do
  (cd /tmp && PYTHONPATH=/tmp/ab-pkg-base timeout 45 ncu --metrics \
     lts__t_sector_hit_rate.pct,dram__bytes_read.sum,gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed \
     -k regex:prefill python3 $R/bench/profile_prefill.py 128 $s causal sm90 none 32/8) > $O/ncu-l2-${s%%:*}.txt 2>&1
  echo "== $s"; grep -E "prefill|hit_rate|dram__bytes|duration|sm__throughput" $O/ncu-l2-${s%%:*}.txt | cut -c1-150; done; el ncu
rm -f $O/*/*.png; cd $OUT && tar czf c.tgz c && rm -rf c && ls -la c.tgz
