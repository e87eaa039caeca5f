# decode-copies-under-s (at one row tile the next tile's copies are issued after S's products
# instead of before them, and the contiguous load_tile no longer branches on a tile past the
# keys, so ptxas interleaves the copies' address arithmetic with the products' dependent chain;
# SASS here, sm_90a bf16 D 128: the lean one-row-tile loop 569 -> 555 instructions with the
# LDGSTS between the HMMAs; ptxas: lean 166 -> 168 registers, general 199 -> 221, more row tiles
# as before or fewer, no spills) against main, one call, any card:
#   scripts/ab_trees.sh -p decode-copies-under-s && git rev-parse --short HEAD > .commit
#   cp <this file> .abp/call.sh
# then `bash .abp/call.sh` with carry [".deps", ".abp", ".commit"] (about 200 s).
# First the branch's tests, the interleaved A/B and the four sanitizers (the push merge's call),
# then both trees' timelines, stamped (with main's stamps inside open_landing) and unstamped.
W=decode-copies-under-s bash bench/results/ab/h100-stop73-decode-push-merge-call.sh
source scripts/gpu/device_deps.sh unpack >/dev/null
for t in base decode-copies-under-s; do
  bash scripts/gpu/trace_decode_build.sh /root/ab/$t /root/ab/$t/build-trace 8 &
done; wait
for hq in 32 64; do for kv in 512 2048; do for t in base decode-copies-under-s; do
  echo "== $t $hq/8 KV $kv warm"; timeout 60 /root/ab/$t/build-trace/flashbuf_trace_decode $kv 0 $hq 8 1 9 1
  echo "== $t $hq/8 KV $kv cold"; timeout 60 /root/ab/$t/build-trace/flashbuf_trace_decode $kv 0 $hq 8 1 9 0
  echo "== $t $hq/8 KV $kv unstamped"; timeout 60 /root/ab/$t/build-trace/flashbuf_trace_decode_unstamped $kv 0 $hq 8 1 9 0
done; done; done 2>&1 | tee /root/call/c/trace.txt
tar -C /root/call -czf $OUT/c.tgz c
