# Ran at stop 76 on an H100 at e6816f1 (`bash .abp/trace.sh`, carry [".deps", ".abp", ".commit"], 42 s):
# h100-stop76-decode-trace/trace-prologue-e6816f1.txt. With the stamps added after it (the
# parameters' read, the landing's init and fence) it has not run: no device time was left.
# To run it again: mkdir -p .abp && cp <this file> .abp/trace.sh && git rev-parse --short HEAD > .commit, then
# `bash .abp/trace.sh` with carry [".deps", ".abp", ".commit"] (any card; about 45 s and the start).
# The decode timelines with the prologue split (landing set-up, Q's copies, the tiles' copies, the
# length, thread 0's own wait, the tile barrier), B 1 32/8 and 64/8, KV 512 / 2k, warm and cold;
# and the unstamped twin's µs a launch.
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1 | tee $O/gpu.txt
source scripts/gpu/device_deps.sh unpack >/dev/null
bash scripts/gpu/trace_decode_build.sh . /root/bt; el build
for hq in 32 64; do for kv in 512 2048; do for w in 1 0; do
  echo "== $hq/8 KV $kv warm=$w"; timeout 60 /root/bt/flashbuf_trace_decode $kv 0 $hq 8 1 9 $w
done; echo "== $hq/8 KV $kv unstamped"; timeout 60 /root/bt/flashbuf_trace_decode_unstamped $kv 0 $hq 8 1 9 0; done; done 2>&1 | tee $O/trace.txt
el trace; (cd $OUT && tar czf c.tgz c)
