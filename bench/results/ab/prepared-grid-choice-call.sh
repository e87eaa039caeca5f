# grid-choice: the Hopper prefill launcher's choice between the persistent grid and a block per
# query block (core/work_items.hpp: persistent_grid_pays, up to 33 key tiles an item; D 64's
# three consumers), timed against both forced choices on one package of main, point by point
# (bench/ab_interleaved.py --tuning; FLASHBUF_PREFILL_GRID=off / on). The rule's thresholds were
# fit at stops 15-16 (unmasked) and 50 (causal only); D 128 unmasked S 4k, 32 key tiles an item,
# is the grid's lowest point against FA4 (0.950) and runs the persistent grid, where FA4's block
# per item gains 10% from S 2k to S 4k and flashbuf's own block per item is used from S 8k on.
# Any card (an A/B of choices on one package); about 330 s. Here first:
#   git checkout main && mkdir -p .abp && git rev-parse --short HEAD > .commit &&
#   cp bench/results/ab/prepared-grid-choice-call.sh .abp/call.sh
# then run `bash .abp/call.sh` with carry [".deps", ".abp", ".commit"].
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
source scripts/gpu/device_deps.sh unpack >/dev/null
export FLASHBUF_PACKAGE_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128;bf16_256_256 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
source scripts/gpu/commit_package.sh
pkg=$HOME/flashbuf-package; c=$(cat .commit)
commit_package $pkg $O/pip.log || exit 1; el package
ab() {  # ab NAME BENCH_ARGS...: the rule against both forced grids, 3 rounds, interleaved
  local name=$1; shift
  timeout 240 python3 bench/ab_interleaved.py --out $O/$name --rounds 3 \
    --tuning per-block:FLASHBUF_PREFILL_GRID=off --tuning persistent:FLASHBUF_PREFILL_GRID=on \
    rule=$pkg:$c per-block=$pkg:$c persistent=$pkg:$c -- "$@" --target-ms 5 --anchors none > $O/ab-$name.log 2>&1
  tail -5 $O/ab-$name.log
  python3 bench/ab_summary.py --table $O/$name rule per-block persistent | tee $O/$name-table.log
  el $name; (cd $OUT && tar czf c.tgz c)
}
ab grid --prefill --backend sm90 --d 64,128,256 --s 2048,4096,8192 --causal both
ab serving --serving --serving-cases gqa,varlen
ab paged --prefill --backend sm90 --prefill-page 16 --d 128 --s 2048,4096 --causal both  # the walk shares the rule
