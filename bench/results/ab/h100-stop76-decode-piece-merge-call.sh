# Prepared at stop 75, run at stop 76 on an H100 (results: h100-ab-stop76-decode-piece-merge/): decode-piece-merge (the push merge's merging side takes one
# thread a piece, which merges the piece's pushed parts from its own shared memory with
# merge_piece, now given a runtime count; main merges each piece over a lane group of 8-16
# lanes with 3-4 rounds of shuffles) against main. Why: the per-block timeline
# (h100-stop75-decode-trace/) puts that step, the merge of the landed parts and the stores, at
# 0.61 µs of B 1's 1.55 µs epilogue. ptxas, sm_90a bf16 D 128, one row tile: the lean kernel
# 166 -> 185 registers, the general one 199 as main, no spills (two blocks an SM either way);
# more row tiles unchanged (they keep the pull merge). The sums are taken in another order, so
# the outputs may differ from main's in the last bits. Any card runs it:
#   git checkout -b decode-piece-merge && git apply bench/results/ab/h100-ab-stop76-decode-piece-merge/decode-piece-merge.patch \
#     && git commit -qam piece-merge && git checkout main && scripts/ab_trees.sh -p decode-piece-merge
#   git rev-parse --short HEAD > .commit && cp <this file> .abp/call.sh
# then `bash .abp/call.sh` with carry [".deps", ".abp", ".commit"] (about 300 s).
# First the push merge's own call (decode, merge, NaN-rule, sinks and fuzz tests of the branch;
# interleaved A/B on the latency rows; the four sanitizers), then both trees' timelines.
W=decode-piece-merge bash bench/results/ab/h100-stop73-decode-push-merge-call.sh
# The timeline tool of each tree, built against that tree's library (bench/trace_decode.cu).
source scripts/gpu/device_deps.sh unpack >/dev/null
for t in base decode-piece-merge; do
  bash scripts/gpu/trace_decode_build.sh /root/ab/$t /root/ab/$t/build-trace 8 &
done; wait
for kv in 512 2048; do for t in base decode-piece-merge; do
  echo "== $t"; timeout 60 /root/ab/$t/build-trace/flashbuf_trace_decode $kv 0 32 8 1 9
done; done 2>&1 | tee /root/call/c/trace.txt
tar -C /root/call -czf $OUT/c.tgz c
