# Ran at stop 75 on an H100 (h100-ab-stop75-decode-deep-contiguous/: tests 38 of 38 after the lean kernel's
# shared-memory limit was raised (the first try launched nothing: 24 failed); 0.96-1.02, dropped).
# decode-deep-contiguous (the lean kernel keeps the deep ring, and the plan gives it to contiguous
# splits of <= 8 tiles at one block per SM, as it does to paged ones) against main, any card:
# the branch's decode tests, then the contiguous rows where the plan changes (B 1 and 8, KV up to
# 8k) interleaved, 5 rounds. Started as
#   scripts/ab_trees.sh -p decode-deep-contiguous && git rev-parse --short HEAD > .commit
#   cp <this file> .abp/ab.sh
# then `bash .abp/ab.sh` with carry [".deps", ".abp", ".commit"] (about 200 s).
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=/root/call/c; rm -rf $O; mkdir -p $O; pack() { tar -C /root/call -czf $OUT/c.tgz c; }
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1 | tee $O/gpu.txt
source scripts/gpu/device_deps.sh unpack >/dev/null
W=decode-deep-contiguous
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_64;bf16_128"
export AB_TEST_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128"
bash scripts/gpu/trees_from_patches.sh base $W >/dev/null; T=/root/ab
timeout 420 env GPU_TESTS='*Decode*:*MergeStates*:*Sinks*' TEST_SHARDS=16 TEST_TIMEOUT_S=150 AB_TEST_TREES=$W \
  AB_INTERLEAVE=1 AB_ROUNDS=5 OUT=$O/d scripts/gpu_ab.sh $T/base $T/$W -- --decode --heads 32/8,64/8,32/32 --b 1,8 \
  --kv 512,1024,2048,4096,8192 --pages 0 --target-ms 5 --anchors none > $O/ab.log 2>&1
grep -A3 "tests:" $O/ab.log; grep -A 40 "$W / base" $O/ab.log; el ab
rm -f $O/*/*.png; pack; ls -la $OUT/c.tgz
