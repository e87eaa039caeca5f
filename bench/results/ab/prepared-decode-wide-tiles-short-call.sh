# The short form (tests, A/B, sanitizers; about 400 s) of prepared-decode-wide-tiles-call.sh: decode-wide-tiles (a split of 3 or 4 key tiles in
# one step: 256-key tiles, 64 keys a warp, through a ring of one stage; the lean kernel, one row
# tile, D <= 128, grids of one block per SM) against main, one call. Here first:
#   git checkout main && scripts/ab_trees.sh -p decode-wide-tiles && git rev-parse --short HEAD > .commit
# then run this file with carry [".deps", ".abp", ".commit"] (copy it into .abp/ so that it travels).
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
# Logs under /root/call/c, packed into $OUT/c.tgz after every part (a call cut by its time limit
# still returns one file with every part done).
O=/root/call/c; rm -rf $O; mkdir -p $O; pack() { tar -C /root/call -czf $OUT/c.tgz c; }
source scripts/gpu/device_deps.sh unpack >/dev/null
W=decode-wide-tiles
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_64;bf16_128"
export AB_TEST_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128"  # every decode instantiation (the default list)
bash scripts/gpu/trees_from_patches.sh base $W >/dev/null; T=/root/ab
# The branch's decode tests (every decode instantiation), then the A/B on the latency-bound rows.
timeout 320 env GPU_TESTS='*Decode*:*MergeStates*:*NanRule*' TEST_SHARDS=16 TEST_TIMEOUT_S=150 AB_TEST_TREES=$W \
  AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/d scripts/gpu_ab.sh $T/base $T/$W -- --decode --heads 32/8,64/8,32/32 --b 1,8 \
  --kv 512,2048,8192 --pages 0 --target-ms 5 --anchors none > $O/ab.log 2>&1
grep -A3 "tests:" $O/ab.log; grep -A 24 "$W / base" $O/ab.log; el ab
pack
B=$T/$W/build-ab/tests/flashbuf_gpu_tests
# Every lean decode case on the wide tile (FLASHBUF_DECODE_WIDE=on), then the sanitizers on it.
[ -x $B ] && echo "decode tests, wide forced on: $(FLASHBUF_DECODE_WIDE=on timeout 45 scripts/gpu_tests_sharded.sh $B '*Decode*:*NanRule*' 16 40 $O/wide-on.log 2>&1 | tail -1)"
for tool in memcheck racecheck synccheck; do
  FLASHBUF_DECODE_WIDE=on timeout 30 compute-sanitizer --tool $tool --error-exitcode 9 $B \
    --gtest_filter='DecodeSanitizer.*' --gtest_brief=1 > $O/san-$tool.log 2>&1
  echo "$tool exit $?"; done; el san
pack; ls -la $OUT/c.tgz
