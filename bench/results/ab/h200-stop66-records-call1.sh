# Stop 66, call 1 of the decode file of record (scripts/gpu/records.sh: builds the package, with
# the decode grid's instantiations only, and stashes FA4's part carried here); then, on that
# package, where paged decode's lead over contiguous goes at the long rows (bench/paged_locality.py:
# pages in order, shuffled in windows, over the pool); then the branch decode-copies-after-s
# against main: its decode GPU tests, racecheck of DecodeSanitizer.*, and the decode rows
# interleaved, two rounds.
# Here: HEAD's short hash in .commit; .abp from `scripts/ab_trees.sh -p` (base = HEAD);
# carry [".deps", ".commit", ".abp", ".fa4site/part.ab", ".fa4site/SHA256SUMS"]. About 330 s.
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
R=$PWD; export FLASHBUF_PACKAGE_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
bash scripts/gpu/records.sh decode 2>&1 | tail -2; el records-1
for a in "1 131072 16" "1 32768 16" "8 32768 16"; do
  (cd /tmp && PYTHONPATH=$HOME/flashbuf-package timeout 120 python3 $R/bench/paged_locality.py $a 2>&1 | tail -8)
done | tee $OUT/paged-locality.txt; el locality
bash scripts/gpu/trees_from_patches.sh base decode-copies-after-s >/dev/null
mkdir -p $OUT/ab; OUT=$OUT/ab GPU_TESTS='Decode*:MergeStates*:SinksDecode*' AB_TEST_TREES=decode-copies-after-s \
  AB_CMAKE_ARGS="$FLASHBUF_PACKAGE_CMAKE_ARGS" AB_TEST_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128" \
  AB_INTERLEAVE=1 AB_ROUNDS=2 bash scripts/gpu_ab.sh /root/ab/base /root/ab/decode-copies-after-s -- --decode \
  --heads 32/8,32/32 --b 1,8 --kv 512,2048,8192,32768 --pages 0,16 --target-ms 5 --anchors none 2>&1 | tail -45; el ab
[ $(( $(date +%s) - t0 )) -lt 420 ] && (timeout 100 compute-sanitizer --tool racecheck \
  /root/ab/decode-copies-after-s/build-ab/tests/flashbuf_gpu_tests --gtest_filter='DecodeSanitizer.*' > $OUT/racecheck.log 2>&1;
  echo "racecheck exit $?: $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' $OUT/racecheck.log | tr '\n' ' ')"); el racecheck
rm -f $OUT/ab/*.png
