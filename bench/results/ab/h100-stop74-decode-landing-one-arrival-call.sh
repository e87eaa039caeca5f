# Prepared at stop 73, run at stop 74 on an H100 (h100-ab-stop74-decode-landing-one-arrival/): decode-landing-one-arrival (the push merge's landing barrier
# armed once, by thread 0 in open_landing, with every byte its slots receive, so that merge_pushed
# only waits) against main: the push merge's own call (tests, interleaved A/B on the latency rows,
# sanitizers) with this branch. The branch is the patch beside this file:
#   git checkout -b decode-landing-one-arrival && git apply bench/results/ab/h100-ab-stop74-decode-landing-one-arrival.patch \
#     && git commit -qam one-arrival && git checkout main && scripts/ab_trees.sh -p decode-landing-one-arrival
#   git rev-parse --short HEAD > .commit && cp <this file> .abp/call.sh
# then `bash .abp/call.sh` with carry [".deps", ".abp", ".commit"] (about 220 s).
W=decode-landing-one-arrival bash bench/results/ab/h100-stop73-decode-push-merge-call.sh
