# DROPPED at stop 61, before any device time: a row sum of P as rounded for P V moves the LSE by up
# to 1.6e-3 (bf16), past the reference check's 1e-3 (bench/lse_rounding_model.py; NOTES-prefill,
# stop 61). Kept as the record of the idea; it refuses to run.
echo "dropped at stop 61: see bench/NOTES-prefill.md"; exit 2
# Prepared at stop 60 for the next GPU time: rowsum-mma (the softmax's row sums on the tensor
# core, P times a ones tile beside O += P V, at exact-max head dims up to Dv 128) or
# rowsum-mma-after (the same, the steady tile's sum products after the issue turn) against main,
# one call (about 520 s). Run prepared-diag-rowsum-mma-call.sh first: if neither `both` nor
# `bothafter` gains there, this call can wait; take rowsum-mma-after where `bothafter` won. Here:
#   git checkout main && scripts/ab_trees.sh -p $R && git rev-parse --short HEAD > .commit
# (R=rowsum-mma or rowsum-mma-after) then run `R=$R bash .abp/call.sh` with carry
# [".deps", ".abp", ".commit"] (copy this file into .abp/call.sh so that it travels).
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O
source scripts/gpu/device_deps.sh unpack >/dev/null
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
export AB_TEST_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_96_96;bf16_128_128;bf16_192_128;bf16_256_256;fp16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
R=${R:-rowsum-mma}
bash scripts/gpu/trees_from_patches.sh base $R >/dev/null; T=/root/ab
timeout 380 env GPU_TESTS='*' TEST_SHARDS=16 TEST_TIMEOUT_S=150 AB_TEST_TREES="$R" AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/p scripts/gpu_ab.sh $T/base $T/$R -- --prefill --backend sm90 --d 64,128 --s 1024,4096,8192,16384 --causal both --target-ms 4 --anchors none > $O/ab.log 2>&1
grep -A3 "tests:" $O/ab.log; grep -A 20 "$R / base" $O/ab.log; el ab
(cd $OUT && tar czf c.tgz c)
timeout 90 env AB_SKIP_BUILD=1 AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/s scripts/gpu_ab.sh $T/base $T/$R -- --serving --serving-cases gqa,varlen > $O/ab-serving.log 2>&1
grep -A 14 "$R / base" $O/ab-serving.log; el serving
(cd $OUT && tar czf c.tgz c)
B=$T/$R/build-ab/tests/flashbuf_gpu_tests
[ -x $B ] && echo "grid3: $(FLASHBUF_PREFILL_GRID=3 timeout 45 scripts/gpu_tests_sharded.sh $B '*Prefill*:*Varlen*:*Fuzz*:*Sinks*:*NanRule*' 16 40 $O/grid3.log 2>&1 | tail -1)"
for tool in memcheck racecheck synccheck; do
  timeout 35 compute-sanitizer --tool $tool --error-exitcode 9 $B --gtest_filter='Kernels/PrefillGpu.SanitizerSmallCases/sm90' --gtest_brief=1 > $O/san-$tool.log 2>&1
  echo "$tool exit $?"; done; el san
rm -f $O/*/*.png; cd $OUT && tar czf c.tgz c && rm -rf c && ls -la c.tgz
