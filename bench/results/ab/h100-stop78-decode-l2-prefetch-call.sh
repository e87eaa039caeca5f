# decode-l2-256 and decode-l2-128 (decode's K/V cp.async copies with the .L2::256B / .L2::128B
# prefetch hint; SASS LDGSTS.E.BYPASS.LTC256B.128) against main, on the rows that read the most
# bytes (B 1-32, KV 2k-32k, contiguous and page 16), cuDNN with main. Any card, about 300 s. Here:
#   scripts/ab_trees.sh -p decode-l2-256 decode-l2-128 && git rev-parse --short HEAD > .commit
#   cp <this file> .abp/call.sh
# then `bash .abp/call.sh` with carry [".deps", ".abp", ".commit"].
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=/root/call/c; rm -rf $O; mkdir -p $O; pack() { tar -C /root/call -czf $OUT/c.tgz c; }
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1 | tee $O/gpu.txt
source scripts/gpu/device_deps.sh unpack >/dev/null
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
export AB_TEST_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128"  # every decode instantiation
bash scripts/gpu/trees_from_patches.sh base decode-l2-256 decode-l2-128 >/dev/null; T=/root/ab
timeout ${AB_LIMIT_S:-420} env GPU_TESTS='*Decode*:*MergeStates*:*Sinks*' TEST_SHARDS=16 TEST_TIMEOUT_S=60 AB_TEST_TREES=decode-l2-256 \
  AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/d scripts/gpu_ab.sh $T/base $T/decode-l2-256 $T/decode-l2-128 -- --decode --heads 32/8 --b 1,8,32 \
  --kv 2048,8192,32768 --pages 0,16 --target-ms 5 --anchors cudnn > $O/ab.log 2>&1
echo "ab exit $?"; grep -A3 "tests:" $O/ab.log; grep -A 60 "/ base" $O/ab.log; el ab
rm -f $O/*/*.png; pack; ls -la $OUT/c.tgz
