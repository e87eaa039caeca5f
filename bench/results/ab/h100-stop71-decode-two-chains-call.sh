# decode-two-chains (the lean decode kernel's split walked by two chains of four warps, each with
# half of the split's tiles, a ring and a Q of its own; choose_two_chains: splits of >= 2 tiles in
# grids of <= 1 block per SM) against main, one call (about 400 s). Here first:
#   git checkout main && scripts/ab_trees.sh -p decode-two-chains && git rev-parse --short HEAD > .commit
#   cp bench/results/ab/prepared-decode-two-chains-call.sh .abp/call.sh
# then `bash .abp/call.sh` with carry [".deps", ".abp", ".commit"].
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
# Logs under /root/call/c, packed into $OUT/c.tgz after every part (a call cut by its time limit
# still returns one file with every part done).
O=/root/call/c; rm -rf $O; mkdir -p $O; pack() { tar -C /root/call -czf $OUT/c.tgz c; }
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1 | tee $O/gpu.txt
source scripts/gpu/device_deps.sh unpack >/dev/null
W=decode-two-chains
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_64;bf16_128"
export AB_TEST_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128"  # every decode instantiation (the default list)
bash scripts/gpu/trees_from_patches.sh base $W >/dev/null; T=/root/ab
# The branch's decode tests (every decode instantiation), then the A/B on the latency-bound rows.
timeout 300 env GPU_TESTS='*Decode*:*MergeStates*:*NanRule*' TEST_SHARDS=16 TEST_TIMEOUT_S=150 AB_TEST_TREES=$W \
  AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/d scripts/gpu_ab.sh $T/base $T/$W -- --decode --heads 32/8,64/8,32/32 --b 1,8 \
  --kv 512,2048,8192 --pages 0 --target-ms 5 --anchors none > $O/ab.log 2>&1
grep -A3 "tests:" $O/ab.log; grep -A 24 "$W / base" $O/ab.log; el ab
pack
B=$T/$W/build-ab/tests/flashbuf_gpu_tests
# Every lean decode case with two chains (FLASHBUF_DECODE_CHAINS=on), then the sanitizers on it.
[ -x $B ] && echo "decode tests, two chains forced on: $(FLASHBUF_DECODE_CHAINS=on timeout 45 scripts/gpu_tests_sharded.sh $B '*Decode*:*NanRule*' 16 40 $O/chains-on.log 2>&1 | tail -1)"
for tool in memcheck racecheck synccheck; do
  FLASHBUF_DECODE_CHAINS=on timeout 30 compute-sanitizer --tool $tool --error-exitcode 9 $B \
    --gtest_filter='DecodeSanitizer.*' --gtest_brief=1 > $O/san-$tool.log 2>&1
  echo "$tool exit $?"; done; el san
pack
# The rule's neighbours: the branch with two chains forced on / off (KV 1k-8k, B 1 and 8).
for w in on off; do
  (cd /tmp && FLASHBUF_DECODE_CHAINS=$w PYTHONPATH=/tmp/ab-pkg-$W timeout 35 python3 $T/$W/bench/bench.py --decode \
     --heads 32/8 --b 1,8 --kv 512,1024,2048,4096,8192 --pages 0 --target-ms 5 --anchors none \
     --out $O/knob-$w.json > $O/knob-$w.log 2>&1)
  echo "== FLASHBUF_DECODE_CHAINS=$w"; tail -14 $O/knob-$w.log; done; el knob
rm -f $O/*/*.png $O/*.png; pack; ls -la $OUT/c.tgz
