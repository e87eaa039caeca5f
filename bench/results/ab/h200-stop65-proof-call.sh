# Stop 65's fixes of the KV-cache append and the torch operators on CUDA, lean (about 180 s):
# the package, then the Python tests on CUDA (host lengths checked before they move to the
# device, K/V halves of one pool, bad entries, graphs) and the operators' CPU tests beside them;
# then, before MERGE_BEFORE_S, the cluster merge on the long B 1 decode rows (below).
# Here: HEAD's short hash in .abp/base.commit and .commit; carry [".deps", ".abp", ".commit"].
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=/root/call/c; rm -rf $O; mkdir -p $O; pack() { tar -C /root/call -czf $OUT/c.tgz c; }
source scripts/gpu/device_deps.sh unpack >/dev/null
bash scripts/gpu/trees_from_patches.sh base >/dev/null; T=/root/ab/base; R=$PWD
(cd $T && CMAKE_BUILD_PARALLEL_LEVEL=16 CMAKE_ARGS="-DFLASHBUF_CUDA_ARCHS=90a -DFLASHBUF_INSTANTIATIONS=bf16_128_128 \
   -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128" python3 -m pip install --no-build-isolation --no-deps --target /tmp/ab-pkg-base . \
   > $O/pip.log 2>&1; echo "pip exit $?" >> $O/pip.log); tail -1 $O/pip.log; el build
(cd /tmp && PYTHONPATH=/tmp/ab-pkg-base timeout 200 python3 -X faulthandler -m pytest -q -rs -p no:cacheprovider \
   --rootdir $R $R/python/tests/test_compat_gpu.py $R/python/tests/test_reliability.py $R/python/tests/test_torch_cpu.py) \
   > $O/pytest.log 2>&1
echo "pytest exit $?: $(tail -1 $O/pytest.log)"; grep -E "^(FAILED|ERROR)" $O/pytest.log | head; el pytest; pack; ls -la $OUT/c.tgz
# Then, where time is left: main's long B 1 decode rows with their 16 splits merged in clusters
# of 16 (FLASHBUF_DECODE_MERGE=cluster) against the plan's workspace merge (paged page 16 trails
# contiguous by 5-8% there), alternating, twice.
for r in 1 2; do for m in cluster plan; do
  [ $(( $(date +%s) - t0 )) -lt ${MERGE_BEFORE_S:-170} ] || break 2
  (cd /tmp && FLASHBUF_DECODE_MERGE=$([ $m = cluster ] && echo cluster) PYTHONPATH=/tmp/ab-pkg-base timeout 40 \
     python3 $R/bench/bench.py --decode --heads 32/8,64/8 --b 1 --kv 32768,131072 --pages 0,16 --target-ms 5 \
     --anchors none --out $O/merge-$m-$r.json > $O/merge-$m-$r.log 2>&1)
  echo "== merge $m $r"; tail -9 $O/merge-$m-$r.log; done; done; el merge; pack
