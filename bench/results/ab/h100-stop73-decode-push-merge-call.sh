# decode-push-merge (the cluster merge at one row tile pushes each piece into its merging block's
# shared memory with st.async, counted on that block's mbarrier, instead of pulling after a
# cluster barrier) against main, one call. It ran as
#   scripts/ab_trees.sh -p decode-push-merge && git rev-parse --short HEAD > .commit
#   cp <this file> .abp/call.sh
# with the branch one commit on main, then `bash .abp/call.sh` with carry [".deps", ".abp", ".commit"].
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=/root/call/c; rm -rf $O; mkdir -p $O; pack() { tar -C /root/call -czf $OUT/c.tgz c; }
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1 | tee $O/gpu.txt
source scripts/gpu/device_deps.sh unpack >/dev/null
W=${W:-decode-push-merge}  # the branch against main (its patch in .abp)
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_64;bf16_128"
export AB_TEST_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128"  # every decode instantiation (the default list)
bash scripts/gpu/trees_from_patches.sh base $W >/dev/null; T=/root/ab
# The branch's decode, sinks and fuzz tests (every decode instantiation), then the A/B on the latency rows.
timeout 330 env GPU_TESTS='*Decode*:*MergeStates*:*NanRule*:*Sinks*:*Fuzz*' TEST_SHARDS=16 TEST_TIMEOUT_S=150 AB_TEST_TREES=$W \
  AB_INTERLEAVE=1 AB_ROUNDS=5 OUT=$O/d scripts/gpu_ab.sh $T/base $T/$W -- --decode --heads 32/8,64/8,32/32 --b 1,8 \
  --kv 512,2048,8192 --pages 0,16 --target-ms 5 --anchors none > $O/ab.log 2>&1
grep -A3 "tests:" $O/ab.log; grep -A 40 "$W / base" $O/ab.log; el ab
pack
B=$T/$W/build-ab/tests/flashbuf_gpu_tests
for tool in memcheck racecheck synccheck initcheck; do
  timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 $B --gtest_filter='DecodeSanitizer.*' --gtest_brief=1 \
    > $O/san-$tool.log 2>&1
  echo "$tool exit $?"; done; el san
rm -f $O/*/*.png; pack; ls -la $OUT/c.tgz
