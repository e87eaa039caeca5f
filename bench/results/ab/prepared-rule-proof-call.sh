# Stop 69, any card, one call (about 300 s): main's package with the records' instantiations, the
# new grid rule (persistent_grid_pays: D 128 up to 17 key tiles an item) against both forced grids
# at D 128 and the serving GQA rows, with the CUDA Python tests of the package first (they fit a short budget). Here first:
#   mkdir -p .abp && git rev-parse --short HEAD > .commit && cp bench/results/ab/prepared-rule-proof-call.sh .abp/call.sh
# then `bash .abp/call.sh` with carry [".deps", ".commit", ".abp"].
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1
source scripts/gpu/device_deps.sh unpack >/dev/null
export FLASHBUF_PACKAGE_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128;bf16_256_256 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
source scripts/gpu/commit_package.sh
pkg=$HOME/flashbuf-package; c=$(cat .commit)
commit_package $pkg $O/pip.log || exit 1; el package
ab() {  # ab NAME BENCH_ARGS...: the rule against both forced grids (scripts/gpu/prefill_grid_ab.sh)
  bash scripts/gpu/prefill_grid_ab.sh $pkg $c $O "$@"; el $1; (cd $OUT && tar czf c.tgz c)
}
FILES="test_gpu.py test_compat_gpu.py test_reliability.py test_sinks.py test_catalogue.py" PYTHONPATH=$pkg \
  timeout 150 bash bench/gpu_pytest.sh -q > $O/pytest-cuda.log 2>&1
grep -E "^=+ .*(passed|failed|error|skipped)|exit [0-9]+$" $O/pytest-cuda.log
el pytest; (cd $OUT && tar czf c.tgz c)
ab grid128 --prefill --backend sm90 --d 128 --s 2048,4096,8192 --causal both
ab serving --serving --serving-cases gqa
