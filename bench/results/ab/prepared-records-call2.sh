# Stop 69, H200 call 2 of 2, right after call 1 on the warm machine: FA4's first part completes it,
# records.sh makes the prefill files of record the grid rule and the cache walk touch, then the
# CUDA Python tests of the package (torch operator, compat entry points, bad inputs, sinks).
#   cp bench/results/ab/prepared-records-call2.sh .abp/call2.sh
# then `bash .abp/call2.sh` with carry [".commit", ".abp", ".fa4site/part.aa", ".fa4site/SHA256SUMS"].
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O; R=$PWD
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1
export FLASHBUF_PACKAGE_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128;bf16_256_256 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then  # files of record: H200 only
  OUT=$O timeout 470 bash scripts/gpu/records.sh prefill-sm90 prefill-serving prefill-paged 2>&1 | grep -E "^records:|flashbuf / fa4|median"
else
  echo "not an H200: no files of record"
fi
el records; (cd $OUT && tar czf c.tgz c)
left=$(( 560 - ($(date +%s) - t0) ))
if [ $left -gt 40 ]; then
  (cd /tmp && PYTHONPATH=$HOME/flashbuf-package timeout $left python3 -m pytest -q -p no:cacheprovider --rootdir $R \
     $R/python/tests/test_gpu.py $R/python/tests/test_compat_gpu.py $R/python/tests/test_reliability.py $R/python/tests/test_sinks.py $R/python/tests/test_catalogue.py \
     > $O/pytest-cuda.log 2>&1); tail -3 $O/pytest-cuda.log
fi
el pytest; (cd $OUT && tar czf c.tgz c)
