# decode-tma (the lean one-row-tile kernel's K and V by TMA on sm_90a: thread 0 asks for each
# tile's 64-column slabs on the stage's mbarrier; SlabTile views for the warps' ldmatrix reads;
# ptxas sm_90a bf16 D 128: 161 registers, no spills) against main, one call, any card:
#   scripts/ab_trees.sh -p decode-tma && git rev-parse --short HEAD > .commit
#   cp <this file> .abp/call.sh
# then `bash .abp/call.sh` with carry [".deps", ".abp", ".commit"] (about 200 s).
# The branch's decode, merge, NaN-rule, sinks and fuzz tests (every decode instantiation), the
# interleaved A/B on the latency rows, the four sanitizers: the push merge's call.
W=decode-tma bash bench/results/ab/h100-stop73-decode-push-merge-call.sh
