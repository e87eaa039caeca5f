# Stop 69, H200 call 1 of 2 (FA4's parts in two calls; scripts/gpu/records.sh): builds main's package
# with the records' instantiations and stashes FA4's second part, then times the new grid rule
# (persistent_grid_pays: D 128 up to 17 key tiles an item) against both forced grids on it, as
# prepared-grid-choice-call.sh did on an H100, at D 128 and the serving GQA rows. Here first:
#   mkdir -p .abp && git rev-parse --short HEAD > .commit && cp bench/results/ab/prepared-records-call1.sh .abp/call1.sh
# then `bash .abp/call1.sh` with carry [".deps", ".commit", ".abp", ".fa4site/part.ab", ".fa4site/SHA256SUMS"].
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1
export FLASHBUF_PACKAGE_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128;bf16_256_256 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
OUT=$O bash scripts/gpu/records.sh prefill-sm90 prefill-serving prefill-paged 2>&1 | tail -5; el package
pkg=$HOME/flashbuf-package; c=$(cat .commit)
ab() {  # ab NAME BENCH_ARGS...: the rule against both forced grids (scripts/gpu/prefill_grid_ab.sh)
  bash scripts/gpu/prefill_grid_ab.sh $pkg $c $O "$@"; el $1; (cd $OUT && tar czf c.tgz c)
}
ab grid128 --prefill --backend sm90 --d 128 --s 2048,4096,8192 --causal both
ab serving --serving --serving-cases gqa
