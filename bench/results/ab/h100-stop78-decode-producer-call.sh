# Prepared at stop 78, run at stop 79 (results beside the patch). The branch is
# results/ab/h100-ab-stop79-decode-producer/decode-producer.patch (on main; branch decode-producer here):
#   git checkout -b decode-producer && git apply bench/results/ab/h100-ab-stop79-decode-producer/decode-producer.patch && git commit -qam decode-producer && git checkout main
# decode-producer (stop 77's decode-tma with its tiles asked for by a fifth, producer warp:
# full and empty mbarriers a stage, no block barrier a step; ptxas sm_90a bf16 D 128: 157
# registers, no spills; the other kernels' SASS main's but for the parameters' offsets) against
# main, one call, any card, about 220 s (the contiguous rows only: the paged ones keep main's
# kernels). Here:
#   scripts/ab_trees.sh -p decode-producer && git rev-parse --short HEAD > .commit
#   cp <this file> .abp/call.sh
# then `bash .abp/call.sh` with carry [".deps", ".abp", ".commit"].
# The push merge's call (tests of the branch, interleaved A/B, sanitizers) with a limit on each
# part, since a TMA kernel that never completes its barrier hangs rather than fails; the
# sanitizers run only where every test passed. The paged rows take the cp.async kernels, whose
# SASS is main's but for the parameters' offsets (the maps' alignment moves the block).
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=/root/call/c; rm -rf $O; mkdir -p $O; pack() { tar -C /root/call -czf $OUT/c.tgz c; }
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1 | tee $O/gpu.txt
source scripts/gpu/device_deps.sh unpack >/dev/null
W=decode-producer
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_64;bf16_128"
export AB_TEST_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128"  # every decode instantiation (the default list)
bash scripts/gpu/trees_from_patches.sh base $W >/dev/null; T=/root/ab
timeout ${AB_LIMIT_S:-300} env GPU_TESTS='*Decode*:*MergeStates*:*NanRule*:*Sinks*:*Fuzz*' TEST_SHARDS=16 TEST_TIMEOUT_S=60 AB_TEST_TREES=$W \
  AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/d scripts/gpu_ab.sh $T/base $T/$W -- --decode --heads 32/8,64/8,32/32 --b 1,8 \
  --kv 512,2048,8192 --pages 0 --target-ms 5 --anchors none > $O/ab.log 2>&1
echo "ab exit $?"; grep -A3 "tests:" $O/ab.log; grep -A 40 "$W / base" $O/ab.log; el ab
pack
if grep -q "$W tests: .* 0 failed" $O/ab.log; then
  B=$T/$W/build-ab/tests/flashbuf_gpu_tests
  for tool in memcheck synccheck racecheck; do
    timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 $B --gtest_filter='DecodeSanitizer.*' --gtest_brief=1 \
      > $O/san-$tool.log 2>&1
    echo "$tool exit $?"; done; el san
else
  grep -E "FAILED|Failure|error" $O/d/tests-$W.log 2>/dev/null | head -30
fi
rm -f $O/*/*.png; pack
# The branch's timelines, the TMA block against the cp.async one in the same build (the trace
# tool's last argument), B 1 32/8 heads, KV 512 / 2k / 4k, warm L2.
bash scripts/gpu/trace_decode_build.sh $T/$W $T/$W/build-trace; el trace-build
for kv in 512 2048 4096; do for tma in 1 0; do
  echo "== tma=$tma KV $kv warm"; timeout 30 $T/$W/build-trace/flashbuf_trace_decode $kv 0 32 8 1 9 1 $tma
  echo "== tma=$tma KV $kv unstamped"; timeout 30 $T/$W/build-trace/flashbuf_trace_decode_unstamped $kv 0 32 8 1 9 0 $tma
done; done > $O/trace.txt 2>&1; el trace
pack; ls -la $OUT/c.tgz
