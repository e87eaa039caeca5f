# decode-tma (the lean one-row-tile kernel's K and V by TMA on sm_90a: thread 0 asks for each
# tile's 64-column slabs on the stage's mbarrier; SlabTile views for the warps' ldmatrix reads;
# ptxas sm_90a bf16 D 128: 161 registers, no spills) against main, one call, any card:
#   scripts/ab_trees.sh -p decode-tma && git rev-parse --short HEAD > .commit
#   cp <this file> .abp/call.sh
# then `bash .abp/call.sh` with carry [".deps", ".abp", ".commit"] (about 200 s; the contiguous latency rows only, where the branch differs).
# The push merge's call (tests of the branch, interleaved A/B, sanitizers) with shorter limits,
# since a TMA kernel that never completes its barrier hangs rather than fails: the sanitizers
# run only where every test passed (memcheck and racecheck: the device time was short).
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=/root/call/c; rm -rf $O; mkdir -p $O; pack() { tar -C /root/call -czf $OUT/c.tgz c; }
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1 | tee $O/gpu.txt
source scripts/gpu/device_deps.sh unpack >/dev/null
W=decode-tma
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_64;bf16_128"
export AB_TEST_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128"  # every decode instantiation (the default list)
bash scripts/gpu/trees_from_patches.sh base $W >/dev/null; T=/root/ab
timeout ${AB_LIMIT_S:-170} env GPU_TESTS='*Decode*:*MergeStates*:*NanRule*:*Sinks*:*Fuzz*' TEST_SHARDS=16 TEST_TIMEOUT_S=45 AB_TEST_TREES=$W \
  AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/d scripts/gpu_ab.sh $T/base $T/$W -- --decode --heads 32/8,64/8 --b 1,8 \
  --kv 512,2048,8192 --pages 0 --target-ms 5 --anchors none > $O/ab.log 2>&1
echo "ab exit $?"; grep -A3 "tests:" $O/ab.log; grep -A 40 "$W / base" $O/ab.log; el ab
pack
if grep -q "$W tests: .* 0 failed" $O/ab.log; then
  B=$T/$W/build-ab/tests/flashbuf_gpu_tests
  for tool in memcheck racecheck; do
    timeout 25 compute-sanitizer --tool $tool --error-exitcode 9 $B --gtest_filter='DecodeSanitizer.*' --gtest_brief=1 \
      > $O/san-$tool.log 2>&1
    echo "$tool exit $?"; done; el san
else
  grep -E "FAILED|Failure|error" $O/d/tests-$W.log 2>/dev/null | head -30
fi
rm -f $O/*/*.png; pack; ls -la $OUT/c.tgz
