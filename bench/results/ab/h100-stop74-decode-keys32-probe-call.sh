# Ran at stop 74 (results: h100-ab-stop74-decode-keys32-probe/): scripts/ab_trees.sh -p decode-keys32-probe && git rev-parse --short HEAD > .commit && cp <this file> .abp/call.sh; carry [".deps", ".abp", ".commit"].
# decode-keys32-probe against main on an H100: the latency rows, interleaved, 5 rounds (bench.py checks every result against the reference).
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=/root/call/c; rm -rf $O; mkdir -p $O; pack() { tar -C /root/call -czf $OUT/c.tgz c; }
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1 | tee $O/gpu.txt
source scripts/gpu/device_deps.sh unpack >/dev/null
W=decode-keys32-probe
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
bash scripts/gpu/trees_from_patches.sh base $W >/dev/null; T=/root/ab
timeout 400 env AB_INTERLEAVE=1 AB_ROUNDS=5 OUT=$O/d scripts/gpu_ab.sh $T/base $T/$W -- --decode --heads 32/8,64/8,32/32 --b 1,8 \
  --kv 512,2048,4096,8192 --pages 0,16 --target-ms 5 --anchors none > $O/ab.log 2>&1
grep -A 50 "$W / base" $O/ab.log; grep -i "error\|refus\|wrong" $O/ab.log | head; el ab
rm -f $O/*/*.png; pack
