t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O
source scripts/gpu/device_deps.sh unpack >/dev/null
export AB_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_96_96;bf16_128_128;bf16_256_256 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
bash scripts/gpu/trees_from_patches.sh base exps-before-wait >/dev/null; T=/root/ab
timeout 330 env GPU_TESTS='*Prefill*:*Sinks*:*NanRule*:*Fuzz*:*Varlen*:*Softcap*' AB_TEST_TREES="exps-before-wait" AB_INTERLEAVE=1 AB_ROUNDS=3 OUT=$O/p scripts/gpu_ab.sh $T/base $T/exps-before-wait -- --prefill --backend sm90 --d 96,128 --s 1024,2048,4096,8192,16384 --causal both --target-ms 4 --anchors none > $O/ab.log 2>&1
grep "tests:" $O/ab.log; grep -A 30 "exps-before-wait / base" $O/ab.log | tail -22; el ab
B=$T/exps-before-wait/build-ab/tests/flashbuf_gpu_tests
[ -x $B ] && FLASHBUF_PREFILL_GRID=3 timeout 45 scripts/gpu_tests_sharded.sh $B '*Prefill*:*Fuzz*' 12 40 $O/grid3.log 2>&1 | tail -1; el grid3
cd $OUT && tar czf c.tgz c && rm -rf c
