# Any card (an H100 expected), about 400 s: the decode grid of record's command at the head beside
# FA2 and cuDNN (no FA4: its decode column is not what the decode targets compare with),
# then the CUDA Python tests that name the Hopper prefill (test_gpu.py's backend="sm90" cases fail
# unless that kernel runs: the first GPU run of the sm_90a build-list check) and the bad-input ones.
# Here first:
#   mkdir -p .abp && git rev-parse --short HEAD > .commit && cp <this file> .abp/call.sh
# then `bash .abp/call.sh` with carry [".deps", ".commit", ".abp"].
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1 | tee $O/gpu.txt
export FLASHBUF_PACKAGE_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128;bf16_256_256 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
RECORDS_ANCHORS_ONLY_OK=1 OUT=$O timeout 280 bash scripts/gpu/records.sh decode 2>&1 | grep -E "^records:|cudnn|median" | head -40
el decode; (cd $OUT && tar czf c.tgz c)
FILES="test_gpu.py test_reliability.py" PYTHONPATH=$HOME/flashbuf-package \
  timeout 120 bash bench/gpu_pytest.sh -q > $O/pytest-cuda.log 2>&1
grep -E "^=+ .*(passed|failed|error|skipped)|exit [0-9]+$" $O/pytest-cuda.log; el pytest
(cd $OUT && tar czf c.tgz c)
