# Prepared at stop 80, not yet run. Branch causal-three-consumers (1d719e0; the patch beside this
# file): three_consumers_pay gives causal D 64 items three consumers from 16 key tiles (causal
# S >= 4k), as unmasked ones, where it asked 32 (S >= 8k). The 32 was fit at stop 22 on the
# persistent walk's paired three-consumer items (causal S 4k read 0.98 there), while a last block's
# consumers without rows still computed; since stop 80 they only keep the pace, and a causal
# sequence's last block is its heaviest (at S 4k: 64 rows over every key, two consumers idle).
# Only the launcher's rule changes: causal D 64 S 4k-8k (and a right window bound alone) leaves
# the persistent grid's two consumers for a block per 192-row item. Host test updated here; the
# kernels' three-consumer causal path is ThreeConsumersOverLongItems' (causal S 8300).
# Here:
#   git checkout -b causal-three-consumers && git apply bench/results/ab/prepared-causal-three-consumers.patch && git commit -qam causal-three-consumers && git checkout main
#   scripts/ab_trees.sh -p causal-three-consumers && git rev-parse --short HEAD > .commit && cp <this file> .abp/call.sh
# then `bash .abp/call.sh` with carry [".deps", ".abp", ".commit"] (any card, about 250 s).
source scripts/gpu/call_start.sh  # el, $O, pack, $O/gpu.txt, the carried packages
W=causal-three-consumers
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
bash scripts/gpu/trees_from_patches.sh base $W >/dev/null; T=/root/ab
timeout 300 env GPU_TESTS='*ThreeConsumers*:*SanitizerSmallCases*:*PrefillGpu.*/sm90' TEST_SHARDS=16 TEST_TIMEOUT_S=150 \
  AB_TEST_TREES=$W AB_INTERLEAVE=1 AB_ROUNDS=5 OUT=$O/p scripts/gpu_ab.sh $T/base $T/$W -- --prefill --backend sm90 \
  --d 64 --s 2048,4096,8192,16384 --causal both --target-ms 5 --anchors none > $O/ab.log 2>&1
echo "ab exit $?"; grep -A3 "tests:" $O/ab.log; grep -A 12 "$W / base" $O/ab.log; el ab
rm -f $O/*/*.png; pack
if grep -q "$W tests: .* 0 failed" $O/ab.log; then
  B=$T/$W/build-ab/tests/flashbuf_gpu_tests
  timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $B --gtest_filter='*SanitizerSmallCases*' \
    --gtest_brief=1 > $O/san-memcheck.log 2>&1
  echo "memcheck exit $?"; el san
else
  grep -E "FAILED|Failure|watchdog" $O/p/tests-$W.log 2>/dev/null | head -30
fi
rm -f $O/*/*.png; pack; ls -la $OUT/c.tgz
