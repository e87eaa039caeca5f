# early-exp3 (three early n8 tiles before the P V wait at D <= 128) and d64-early-exp4 (four at D 64)
# against main, one call. Here: scripts/ab_trees.sh -p early-exp3 d64-early-exp4 &&
# git rev-parse --short HEAD > .commit, this file as .abp/ab.sh; carry [".deps", ".abp", ".commit"].
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=/root/call/c; rm -rf $O; mkdir -p $O; pack() { tar -C /root/call -czf $OUT/c.tgz c; }
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1 | tee $O/gpu.txt
source scripts/gpu/device_deps.sh unpack >/dev/null
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
bash scripts/gpu/trees_from_patches.sh base early-exp3 d64-early-exp4 >/dev/null; T=/root/ab
timeout 400 env GPU_TESTS='*Prefill*:*Sinks*:*NanRule*:*Fuzz*:*Varlen*:*Softcap*' TEST_SHARDS=16 TEST_TIMEOUT_S=150 \
  AB_TEST_TREES="early-exp3 d64-early-exp4" AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/p scripts/gpu_ab.sh $T/base $T/early-exp3 \
  $T/d64-early-exp4 -- --prefill --backend sm90 --d 64,128 --s 2048,4096,16384 --causal both --target-ms 5 \
  --anchors none > $O/ab.log 2>&1
grep -A3 "tests:" $O/ab.log; grep -A 16 " / base" $O/ab.log; el ab
rm -f $O/*/*.png; pack; ls -la $OUT/c.tgz
# Call 2, on the same warm machine (packages kept; results in h100-ab-stop72-early-exps/call2/):
#   O=/root/call/c2; T=/root/ab; source scripts/gpu/device_deps.sh unpack
#   AB_SKIP_BUILD=1 AB_INTERLEAVE=1 AB_ROUNDS=5 OUT=$O scripts/gpu_ab.sh $T/base $T/early-exp3 -- --prefill \
#     --backend sm90 --d 64 --s 2048,4096,8192,16384 --causal both --target-ms 5 --anchors none
