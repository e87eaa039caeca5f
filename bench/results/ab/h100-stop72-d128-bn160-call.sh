# d128-bn160 (160-key tiles for the block-per-item Hopper kernel over unmasked keys, 64 < D <= 128)
# against main, one call. Here: scripts/ab_trees.sh -p d128-bn160 && git rev-parse --short HEAD > .commit,
# this file as .abp/ab.sh; carry [".deps", ".abp", ".commit"].
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=/root/call/c; rm -rf $O; mkdir -p $O; pack() { tar -C /root/call -czf $OUT/c.tgz c; }
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1 | tee $O/gpu.txt
source scripts/gpu/device_deps.sh unpack >/dev/null
W=d128-bn160
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
export AB_TEST_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128;fp16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
bash scripts/gpu/trees_from_patches.sh base $W >/dev/null; T=/root/ab
timeout 330 env GPU_TESTS='*Prefill*:*Sinks*:*NanRule*:*Fuzz*:*Varlen*:*Softcap*:*Paged*' TEST_SHARDS=16 TEST_TIMEOUT_S=150 \
  AB_TEST_TREES=$W AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/p scripts/gpu_ab.sh $T/base $T/$W -- --prefill --backend sm90 \
  --d 128 --s 2048,4096,8192,16384 --causal both --target-ms 5 --anchors none > $O/ab.log 2>&1
grep -A3 "tests:" $O/ab.log; grep -A 30 "$W / base" $O/ab.log; el ab; pack
B=$T/$W/build-ab/tests/flashbuf_gpu_tests
# Every test again with a block per query block (the wide tiles for every unmasked problem).
FLASHBUF_PREFILL_GRID=off timeout 120 scripts/gpu_tests_sharded.sh $B '*Prefill*:*Sinks*:*NanRule*:*Fuzz*:*Varlen*:*Softcap*:*Paged*' \
  16 110 $O/tests-off.log | tail -3; el tests-off; pack
timeout 150 env AB_SKIP_BUILD=1 AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/s scripts/gpu_ab.sh $T/base $T/$W -- --serving \
  --anchors none > $O/ab-serving.log 2>&1
grep -A 30 "$W / base" $O/ab-serving.log; el serving; pack
for tool in memcheck racecheck; do
  FLASHBUF_PREFILL_GRID=off timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 $B --gtest_filter='*Sanitizer*' \
    --gtest_brief=1 > $O/san-$tool.log 2>&1
  echo "$tool exit $?"; done; el san
rm -f $O/*/*.png; pack; ls -la $OUT/c.tgz
