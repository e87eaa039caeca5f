# This session's changes outside the kernels, proven on CUDA in one lean call (about 300 s),
# for when the device time left will not hold the paged A/B call: append_kv's GPU tests and
# memcheck, the Python tests on CUDA (the operators called without the dispatcher, the append
# through append_kv with outside entries, the strided page table under check_inputs), and the
# decode step's time through flash_attn_with_kvcache, the session-start Python files against
# the new ones. Here: scripts/ab_trees.sh -p <any branch> (for .abp/base.commit), copy this file
# and .abp/old-py/ (the session-start flash_attn.py, _torch_ops.py, _api.py) into .abp/, and
# carry [".deps", ".abp", ".commit"].
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=/root/call/c; rm -rf $O; mkdir -p $O; pack() { tar -C /root/call -czf $OUT/c.tgz c; }
source scripts/gpu/device_deps.sh unpack >/dev/null
A="-DFLASHBUF_INSTANTIATIONS=bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
bash scripts/gpu/trees_from_patches.sh base >/dev/null; T=/root/ab/base; R=$PWD
(cd $T && CMAKE_BUILD_PARALLEL_LEVEL=8 CMAKE_ARGS="-DFLASHBUF_CUDA_ARCHS=90a $A" python3 -m pip install --no-build-isolation \
   --no-deps --target /tmp/ab-pkg-base . > $O/pip.log 2>&1; echo "pip exit $?" >> $O/pip.log) &
(cmake -S $T -B $T/build-ab -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHBUF_ENABLE_CUDA=ON -DFLASHBUF_CUDA_ARCHS=90a \
   -DFLASHBUF_BUILD_PYTHON=OFF $A > $O/build.log 2>&1 && cmake --build $T/build-ab -j8 --target flashbuf_gpu_tests >> $O/build.log 2>&1
 echo "build exit $?" >> $O/build.log) &
wait; tail -1 $O/pip.log; tail -1 $O/build.log; el build
B=$T/build-ab/tests/flashbuf_gpu_tests
timeout 60 $B --gtest_filter='AppendKvGpu.*:*Paged*:DecodeSanitizer.*' --gtest_brief=1 > $O/gtest.log 2>&1
echo "gtest exit $?: $(grep -E 'PASSED|FAILED' $O/gtest.log | tr '\n' ' ')"
el gtest; pack
(cd /tmp && PYTHONPATH=/tmp/ab-pkg-base timeout 200 python3 -X faulthandler -m pytest -q -rs -p no:cacheprovider \
   --rootdir $R $R/python/tests/test_gpu.py $R/python/tests/test_compat_gpu.py $R/python/tests/test_reliability.py \
   $R/python/tests/test_catalogue.py $R/python/tests/test_sinks.py) > $O/pytest.log 2>&1
echo "pytest exit $?: $(tail -1 $O/pytest.log)"; grep -E "^(FAILED|ERROR)" $O/pytest.log | head; el pytest; pack
rm -rf /tmp/ab-pkg-old && cp -r /tmp/ab-pkg-base /tmp/ab-pkg-old && cp .abp/old-py/*.py /tmp/ab-pkg-old/flashbuf/
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 $B --gtest_filter='AppendKvGpu.*' --gtest_brief=1 > $O/san-append.log 2>&1
echo "AppendKvGpu memcheck exit $?"; el memcheck; pack
for r in 1 2; do for t in old base; do
  (cd /tmp && PYTHONPATH=/tmp/ab-pkg-$t timeout 40 python3 $R/bench/host_overhead.py --device cuda --calls 300 --rounds 2) > $O/host-$t-$r.log 2>&1
  echo "== $t $r"; tail -4 $O/host-$t-$r.log; done; done; el host
pack; ls -la $OUT/c.tgz
