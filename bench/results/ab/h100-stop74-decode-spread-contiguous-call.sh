# Ran at stop 74 (results: h100-ab-stop74-decode-spread-contiguous/), as h100-stop74-decode-spread-clusters-call.sh with W=decode-spread-contiguous, the rows below and GPU_TESTS=*Decode*.
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=/root/call/c; rm -rf $O; mkdir -p $O; pack() { tar -C /root/call -czf $OUT/c.tgz c; }
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1 | tee $O/gpu.txt
source scripts/gpu/device_deps.sh unpack >/dev/null
W=decode-spread-contiguous
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_64;bf16_128"
export AB_TEST_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128"
bash scripts/gpu/trees_from_patches.sh base $W >/dev/null; T=/root/ab
timeout 420 env GPU_TESTS='*Decode*' TEST_SHARDS=16 TEST_TIMEOUT_S=150 AB_TEST_TREES=$W \
  AB_INTERLEAVE=1 AB_ROUNDS=5 OUT=$O/d scripts/gpu_ab.sh $T/base $T/$W -- --decode --heads 32/8,64/8 --b 1 \
  --kv 4096,5120,6144,8192,12288 --pages 0,16 --target-ms 5 --anchors none > $O/ab.log 2>&1
grep -A3 "tests:" $O/ab.log; grep -A 40 "$W / base" $O/ab.log; el ab
rm -f $O/*/*.png; pack; ls -la $OUT/c.tgz
