# Stop 66: bench/paged_locality.py on the H200 (the H100 calls measured it first): main's package
# (bf16 D 128 only), three rows. Here: carry [".deps"]. About 80 s.
R=$PWD; source scripts/gpu/device_deps.sh unpack >/dev/null
CMAKE_BUILD_PARALLEL_LEVEL=16 CMAKE_ARGS="-DFLASHBUF_CUDA_ARCHS=90a -DFLASHBUF_INSTANTIATIONS=bf16_128_128 \
  -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128" python3 -m pip install --no-build-isolation --no-deps --target /tmp/pkg . \
  > $OUT/pip.log 2>&1; echo "pip exit $?"
for a in "1 131072 16" "1 32768 16" "8 32768 16" "8 8192 16"; do
  (cd /tmp && PYTHONPATH=/tmp/pkg timeout 100 python3 $R/bench/paged_locality.py $a 2>&1 | tail -8)
done | tee $OUT/paged-locality.txt
