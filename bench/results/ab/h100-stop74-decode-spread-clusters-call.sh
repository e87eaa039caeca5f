# Ran at stop 74 (results: h100-ab-stop74-decode-spread-clusters/); started as scripts/ab_trees.sh -p decode-spread-clusters && git rev-parse --short HEAD > .commit && cp <this file> .abp/call.sh, carry [".deps", ".abp", ".commit"].
# decode-spread-clusters against main on an H100: decode host/GPU tests of the branch, then the B 1 rows where the plan changes (KV 3k-4k) and its neighbours.
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=/root/call/c; rm -rf $O; mkdir -p $O; pack() { tar -C /root/call -czf $OUT/c.tgz c; }
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1 | tee $O/gpu.txt
source scripts/gpu/device_deps.sh unpack >/dev/null
W=decode-spread-clusters
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_64;bf16_128"
export AB_TEST_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128"
bash scripts/gpu/trees_from_patches.sh base $W >/dev/null; T=/root/ab
timeout 420 env GPU_TESTS='*Decode*:*MergeStates*:*Sinks*' TEST_SHARDS=16 TEST_TIMEOUT_S=150 AB_TEST_TREES=$W \
  AB_INTERLEAVE=1 AB_ROUNDS=5 OUT=$O/d scripts/gpu_ab.sh $T/base $T/$W -- --decode --heads 32/8,64/8 --b 1 \
  --kv 2048,3072,4096,6144,8192 --pages 0,16 --target-ms 5 --anchors none > $O/ab.log 2>&1
grep -A3 "tests:" $O/ab.log; grep -A 40 "$W / base" $O/ab.log; el ab
rm -f $O/*/*.png; pack; ls -la $OUT/c.tgz
