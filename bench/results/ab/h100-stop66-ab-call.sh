# Stop 66 on an H100 (the H200s did not start): where paged decode's lead over contiguous goes at
# the long rows (bench/paged_locality.py: pages in order, shuffled in windows, over the pool; main's
# package), then the branch decode-copies-after-s against main: its decode GPU tests, racecheck of
# DecodeSanitizer.*, and the decode rows interleaved, two rounds.
# Here: .abp from `scripts/ab_trees.sh -p` (base = HEAD); carry [".deps", ".commit", ".abp"]. About 330 s.
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
R=$PWD; ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
source scripts/gpu/device_deps.sh unpack >/dev/null
bash scripts/gpu/trees_from_patches.sh base decode-copies-after-s >/dev/null
mkdir -p $OUT/ab; OUT=$OUT/ab GPU_TESTS='Decode*:MergeStates*:SinksDecode*' AB_TEST_TREES=decode-copies-after-s \
  AB_CMAKE_ARGS="$ARGS" AB_TEST_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128" \
  AB_INTERLEAVE=1 AB_ROUNDS=2 bash scripts/gpu_ab.sh /root/ab/base /root/ab/decode-copies-after-s -- --decode \
  --heads 32/8,32/32 --b 1,8 --kv 512,2048,8192,32768 --pages 0,16 --target-ms 5 --anchors none 2>&1 | tail -45; el ab
for a in "1 131072 16" "1 32768 16" "8 32768 16"; do
  (cd /tmp && PYTHONPATH=/tmp/ab-pkg-base timeout 100 python3 $R/bench/paged_locality.py $a 2>&1 | tail -8)
done | tee $OUT/paged-locality.txt; el locality
[ $(( $(date +%s) - t0 )) -lt 400 ] && (timeout 90 compute-sanitizer --tool racecheck \
  /root/ab/decode-copies-after-s/build-ab/tests/flashbuf_gpu_tests --gtest_filter='DecodeSanitizer.*' > $OUT/racecheck.log 2>&1;
  echo "racecheck exit $?: $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' $OUT/racecheck.log | tr '\n' ' ')"); el racecheck
rm -f $OUT/ab/*.png
