# The CUDA Python tests after the push merge (stop 73): test_gpu, test_compat_gpu (the decode
# entry points: flash_attn_with_kvcache), test_reliability (bad inputs through the operators).
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee $O/gpu.txt
source scripts/gpu/device_deps.sh unpack >/dev/null
export FLASHBUF_PACKAGE_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
source scripts/gpu/commit_package.sh
commit_package $HOME/flashbuf-package $O/pip.log || exit 1; el package
FILES="test_compat_gpu.py test_reliability.py test_gpu.py" PYTHONPATH=$HOME/flashbuf-package \
  timeout 150 bash bench/gpu_pytest.sh -q > $O/pytest-cuda.log 2>&1
grep -E "^=+ .*(passed|failed|error|skipped)|exit [0-9]+$|FAILED" $O/pytest-cuda.log; el pytest
(cd $OUT && tar czf c.tgz c)
