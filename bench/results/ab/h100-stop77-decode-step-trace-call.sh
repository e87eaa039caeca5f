# The decode timelines with each key step split (the trace tool's tiles 1-3: thread 0's products
# of the step before done, its copies of the tile landed, every warp past the tile's barrier), so
# that a step's wait for its bytes shows apart from its work. B 1, 32/8 heads, KV 512 / 2k / 4k,
# warm and cold, and the unstamped twin. Any card, about 60 s and the start. Here first:
#   mkdir -p .abp && cp <this file> .abp/trace.sh && git rev-parse --short HEAD > .commit
# then `bash .abp/trace.sh` with carry [".deps", ".abp", ".commit"].
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1 | tee $O/gpu.txt
source scripts/gpu/device_deps.sh unpack >/dev/null
bash scripts/gpu/trace_decode_build.sh . /root/bt; el build
for kv in 512 2048 4096; do for w in 1 0; do
  echo "== 32/8 KV $kv warm=$w"; timeout 60 /root/bt/flashbuf_trace_decode $kv 0 32 8 1 9 $w
done; echo "== 32/8 KV $kv unstamped"; timeout 60 /root/bt/flashbuf_trace_decode_unstamped $kv 0 32 8 1 9 0; done 2>&1 | tee $O/trace.txt
el trace; (cd $OUT && tar czf c.tgz c)
