# Prepared at stop 61 for the next GPU time: decode-wide-tiles (a split of 3 or 4 key tiles in
# one step: 256-key tiles, 64 keys a warp, through a ring of one stage; the lean kernel, one row
# tile, D <= 128, grids of one block per SM) against main, one call (about 500-580 s). Here first:
#   git checkout main && scripts/ab_trees.sh -p decode-wide-tiles && git rev-parse --short HEAD > .commit
# then run this file with carry [".deps", ".abp", ".commit"] (copy it into .abp/ so that it travels).
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
# Logs under /root/call/c, packed into $OUT/c.tgz after every part (a call cut by its time limit
# still returns one file with every part done).
O=/root/call/c; rm -rf $O; mkdir -p $O; pack() { tar -C /root/call -czf $OUT/c.tgz c; }
[ -d .fa4site ] && bash scripts/gpu/fa4_site.sh stash
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
# SHORT=1: stop here (tests, A/B and sanitizers, about 400 s), where the budget is short.
[ "${SHORT:-}" = 1 ] && { pack; ls -la $OUT/c.tgz; exit 0; }
# The rule's neighbours: the branch with the wide tile forced on / off where the rule leaves it.
# (The branch's harness: main's does not pass FLASHBUF_DECODE_WIDE on.)
for w in on off; do
  (cd /tmp && FLASHBUF_DECODE_WIDE=$w PYTHONPATH=/tmp/ab-pkg-$W timeout 35 python3 $T/$W/bench/bench.py --decode \
     --heads 32/8 --b 1,8 --kv 512,1024,2048,4096,8192 --pages 0 --target-ms 5 --anchors none \
     --out $O/knob-$w.json > $O/knob-$w.log 2>&1)
  echo "== FLASHBUF_DECODE_WIDE=$w"; tail -14 $O/knob-$w.log; done
# Fewer, wide splits where the plan's are of one or two plain tiles (B 1 KV 512 / 1k).
for n in 2 4; do
  (cd /tmp && FLASHBUF_DECODE_WIDE=on FLASHBUF_DECODE_SPLITS=$n PYTHONPATH=/tmp/ab-pkg-$W timeout 20 python3 \
     $T/$W/bench/bench.py --decode --heads 32/8 --b 1 --kv 512,1024,2048 --pages 0 --target-ms 5 --anchors none \
     --out $O/knob-s$n.json > $O/knob-s$n.log 2>&1)
  echo "== FLASHBUF_DECODE_WIDE=on FLASHBUF_DECODE_SPLITS=$n"; tail -6 $O/knob-s$n.log; done; el knob
rm -f $O/*/*.png; pack
# Main's long paged rows (0.95-0.96 of cuDNN's contiguous time): 16 splits merged in clusters of
# 16 (FLASHBUF_DECODE_MERGE=cluster) against the plan's workspace merge and its second launch.
for m in cluster plan; do
  (cd /tmp && FLASHBUF_DECODE_MERGE=$([ $m = cluster ] && echo cluster) PYTHONPATH=/tmp/ab-pkg-base timeout 40 \
     python3 $T/base/bench/bench.py --decode --heads 32/8,64/8 --b 1 --kv 32768,131072 --pages 0,16 --target-ms 5 \
     --anchors none --out $O/merge-$m.json > $O/merge-$m.log 2>&1)
  echo "== merge $m"; tail -10 $O/merge-$m.log; done; el merge
pack; ls -la $OUT/c.tgz
