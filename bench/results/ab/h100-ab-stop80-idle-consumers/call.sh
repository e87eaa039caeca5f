# Prepared at stop 79, run at stop 80 on an H100 (this folder's README). Branch idle-consumers
# (idle-consumers.patch here): in the Hopper kernel's block per query block, a consumer warpgroup whose 64 rows all
# lie past the block's query rows keeps the rings' and the issue turns' pace without products or
# softmax (PrefillSm90::pace_tiles; it still waits for Q's landing, since its epilogue stages O
# over its Q rows), so the consumers with rows run alone (stop 56: a consumer's
# steady tile 1,881 cycles with the other idle, 2,464 without). On the grid that is D 64's three
# consumers over 192 rows (unmasked S >= 2k, causal >= 8k), whose last block of each (head,
# sequence) holds 128 rows (S 2k, 8k: one consumer idle) or 64 (S 4k, 16k: two), and any block
# per item whose sequence is no multiple of its rows (varlen, odd lengths). ptxas sm_90a bf16
# D 64 / 128 / 256: registers and spill stores as main, no new C7520 (the paged D 256 kernel's
# spill loads 64 -> 72 bytes); the steady loops' SASS as main (bench/sass_loops.py: 423 / 775 /
# 1801 instructions at D 64's three consumers, 456 / 809 / 1836 at D 128, 1358 at D 256); the
# one-consumer kernels unchanged. A new GPU test, ConsumersWithoutRowsKeepThePace; reviewed by a
# helper (bench/NOTES-prefill.md, stop 79).
# Here:
#   git checkout -b idle-consumers && git apply bench/results/ab/h100-ab-stop80-idle-consumers/idle-consumers.patch && git commit -qam idle-consumers && git checkout main
#   scripts/ab_trees.sh -p idle-consumers && git rev-parse --short HEAD > .commit && cp <this file> .abp/call.sh
# then `bash .abp/call.sh` with carry [".deps", ".abp", ".commit"] (any card, about 500 s).
source scripts/gpu/call_start.sh  # el, $O, pack, $O/gpu.txt, the carried packages
W=idle-consumers
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128;bf16_256_256 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
bash scripts/gpu/trees_from_patches.sh base $W >/dev/null; T=/root/ab
# A consumer that never passes its turn hangs rather than fails: every part has a limit.
timeout 330 env GPU_TESTS='*Prefill*:*Sinks*:*NanRule*:*Fuzz*:*Varlen*:*Softcap*:*Paged*' TEST_SHARDS=16 TEST_TIMEOUT_S=150 \
  AB_TEST_TREES=$W AB_INTERLEAVE=1 AB_ROUNDS=5 OUT=$O/p scripts/gpu_ab.sh $T/base $T/$W -- --prefill --backend sm90 \
  --d 64 --s 2048,4096,8192,16384 --causal both --target-ms 5 --anchors none > $O/ab.log 2>&1
echo "ab exit $?"; grep -A3 "tests:" $O/ab.log; grep -A 12 "$W / base" $O/ab.log; el ab
rm -f $O/*/*.png; pack
if grep -q "$W tests: .* 0 failed" $O/ab.log; then
  B=$T/$W/build-ab/tests/flashbuf_gpu_tests
  for tool in memcheck racecheck synccheck; do
    timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $B \
      --gtest_filter='*ConsumersWithoutRowsKeepThePace*:*SanitizerSmallCases*' --gtest_brief=1 > $O/san-$tool.log 2>&1
    echo "$tool exit $?"; done; el san
  pack  # the sanitizers come back even if the serving A/B is cut
  # The serving grid (varlen and odd lengths at D 128) on the packages already built.
  timeout 150 env AB_SKIP_BUILD=1 AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/s scripts/gpu_ab.sh $T/base $T/$W -- --serving \
    --anchors none > $O/ab-serving.log 2>&1
  echo "serving exit $?"; grep -A 22 "$W / base" $O/ab-serving.log; el serving
else
  grep -E "FAILED|Failure|watchdog" $O/p/tests-$W.log 2>/dev/null | head -30
fi
rm -f $O/*/*.png; pack; ls -la $OUT/c.tgz
