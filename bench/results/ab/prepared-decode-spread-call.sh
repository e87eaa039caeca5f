# Prepared at stop 74 for an H200 (any card runs it; only an H200's numbers decide): main, whose plan
# takes 8 splits of <= 8 tiles where clusters of more than 8 would double SMs, against
#   decode-dense-clusters:    main without that rule (the doubled clusters of 12-16, as before): B 1
#                             Hkv 8 KV 3k-4k;
#   decode-spread-contiguous: the rule extended to contiguous splits of <= 16 tiles: KV 5k-8k too;
# interleaved, on the B 1 rows where they change the plan. On an H100
# (h100-ab-stop74-decode-spread-{clusters,contiguous}/) the rule read 1.01-1.18 and the extension
# 1.04-1.09, with the decode tests passing (NOTES-decode, stop 74).
# Standalone: mkdir -p .abp && git rev-parse --short HEAD > .commit && cp <this file> .abp/spread.sh,
# then `bash .abp/spread.sh` with carry [".deps", ".abp", ".commit"] (about 150 s); on the records'
# warm H200, prepared-records-call3.sh runs it last.
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=/root/call/s; rm -rf $O; mkdir -p $O; pack() { tar -C /root/call -czf $OUT/s.tgz s; }
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1 | tee $O/gpu.txt
source scripts/gpu/device_deps.sh unpack >/dev/null
mkdir -p .abp && cp .commit .abp/base.commit
for W in decode-dense-clusters decode-spread-contiguous; do
  cp bench/results/ab/prepared-$W.patch .abp/$W.patch && echo "$(cat .commit)+$W" > .abp/$W.commit
done
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
bash scripts/gpu/trees_from_patches.sh base decode-dense-clusters decode-spread-contiguous >/dev/null; T=/root/ab
timeout 300 env AB_INTERLEAVE=1 AB_ROUNDS=5 OUT=$O/d scripts/gpu_ab.sh $T/base $T/decode-dense-clusters \
  $T/decode-spread-contiguous -- --decode --heads 32/8,64/8 --b 1 --kv 2048,3072,4096,6144,8192 --pages 0,16 \
  --target-ms 5 --anchors none > $O/ab.log 2>&1
grep -B2 -A 22 "/ base" $O/ab.log; el spread
rm -f $O/*/*.png; pack
