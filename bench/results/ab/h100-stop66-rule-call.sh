# Stop 66 (ran on an H100: the H200s did not start): where paged decode's lead over contiguous goes at the long rows
# (bench/paged_locality.py: pages in order, shuffled in windows, over the pool; main's package),
# then main (the deep ring for splits of at most 8 tiles) against the rule before it (f13c534:
# every paged grid of at most one block per SM), the decode rows interleaved, two rounds.
# Here: .abp/base.commit = HEAD, .abp/before-rule.patch = `git diff HEAD f13c534 -- include src tests`;
# carry [".deps", ".commit", ".abp"]. About 250 s.
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
R=$PWD; ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
source scripts/gpu/device_deps.sh unpack >/dev/null
bash scripts/gpu/trees_from_patches.sh base before-rule >/dev/null
for t in base before-rule; do
  (cd /root/ab/$t && CMAKE_BUILD_PARALLEL_LEVEL=8 CMAKE_ARGS="-DFLASHBUF_CUDA_ARCHS=90a $ARGS" python3 -m pip install \
     --no-build-isolation --no-deps --target /tmp/ab-pkg-$t . > $OUT/pip-$t.log 2>&1; echo "pip $t exit $?") &
done; wait; el build
for a in "1 131072 16" "1 32768 16" "8 32768 16"; do
  (cd /tmp && PYTHONPATH=/tmp/ab-pkg-base timeout 100 python3 $R/bench/paged_locality.py $a 2>&1 | tail -8)
done | tee $OUT/paged-locality.txt; el locality
mkdir -p $OUT/ab; OUT=$OUT/ab AB_SKIP_BUILD=1 AB_INTERLEAVE=1 AB_ROUNDS=2 bash scripts/gpu_ab.sh /root/ab/before-rule /root/ab/base \
  -- --decode --heads 32/8,64/8,32/32 --b 1,8 --kv 2048,8192,32768,131072 --pages 0,16,64 --target-ms 5 --anchors none \
  2>&1 | tail -70; el ab; rm -f $OUT/ab/*.png
