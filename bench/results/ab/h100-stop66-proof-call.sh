# Stop 66's proof of main on CUDA and bench/paged_locality.py (written for the H200, ran on an H100; the H100 calls measured
# it first): main's package and GPU tests (bf16 D 128 only), the decode and merge GPU tests, the
# CUDA Python tests, then four paged_locality rows. Here: carry [".deps"]. About 200 s.
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
R=$PWD; ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
source scripts/gpu/device_deps.sh unpack >/dev/null
(CMAKE_BUILD_PARALLEL_LEVEL=8 CMAKE_ARGS="-DFLASHBUF_CUDA_ARCHS=90a $ARGS" python3 -m pip install --no-build-isolation \
   --no-deps --target /tmp/pkg . > $OUT/pip.log 2>&1; echo "pip exit $?") &
(cmake -S . -B /root/bt -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHBUF_ENABLE_CUDA=ON -DFLASHBUF_CUDA_ARCHS=90a \
   -DFLASHBUF_BUILD_PYTHON=OFF $ARGS > $OUT/build-tests.log 2>&1 && cmake --build /root/bt -j8 --target flashbuf_gpu_tests \
   >> $OUT/build-tests.log 2>&1; echo "tests build exit $?") &
wait; el build
res=$(scripts/gpu_tests_sharded.sh /root/bt/tests/flashbuf_gpu_tests 'Decode*:MergeStates*:SinksDecode*:AppendKv*' 8 200 $OUT/gtests.log)
echo "gtests: ${res##*$'\n'}"; el gtests
(cd /tmp && PYTHONPATH=/tmp/pkg timeout 150 python3 -m pytest -q -p no:cacheprovider --rootdir $R $R/python/tests/test_gpu.py \
   $R/python/tests/test_compat_gpu.py $R/python/tests/test_reliability.py $R/python/tests/test_sinks.py > $OUT/pytest.log 2>&1)
echo "pytest exit $?: $(tail -1 $OUT/pytest.log)"; grep -E "^(FAILED|ERROR)" $OUT/pytest.log | head; el pytest
for a in "1 131072 16" "1 32768 16" "8 32768 16" "8 8192 16"; do
  [ $(( $(date +%s) - t0 )) -lt 330 ] || break
  (cd /tmp && PYTHONPATH=/tmp/pkg timeout 60 python3 $R/bench/paged_locality.py $a 2>&1 | tail -8)
done | tee $OUT/paged-locality.txt; el locality
