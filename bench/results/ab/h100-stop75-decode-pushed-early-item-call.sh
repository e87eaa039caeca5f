# Ran at stop 75 on an H100 (h100-ab-stop75-decode-pushed-early-item/: 0.98-1.02, dropped; tests 60 of 60,
# sanitizers clean). Prepared at stop 74: decode-pushed-early-item (the push merge finds its first item's
# output place and the head's sink before it waits on the landing barrier, so their index
# arithmetic and the sink's global load overlap the landing; the idea of stop 73's review) against
# main: the push merge's own call (decode, sinks, NaN-rule and fuzz tests; interleaved A/B on the
# latency rows; the four sanitizers). ptxas, sm_90a bf16 D 128, one row tile: lean kernel 166
# registers as main, general 199 -> 206, no spills. Its gain should show most with sinks, which the
# latency rows do not time: add `--sinks ab` to the A/B's bench arguments for that. The branch is
# the patch beside this file:
#   git checkout -b decode-pushed-early-item && git apply bench/results/ab/h100-ab-stop75-decode-pushed-early-item.patch \
#     && git commit -qam early-item && git checkout main && scripts/ab_trees.sh -p decode-pushed-early-item
#   git rev-parse --short HEAD > .commit && cp <this file> .abp/call.sh
# then `bash .abp/call.sh` with carry [".deps", ".abp", ".commit"] (about 220 s, any card).
W=decode-pushed-early-item bash bench/results/ab/h100-stop73-decode-push-merge-call.sh
