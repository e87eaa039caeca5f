# H200 call 1 of 2 (FA4 arrives in two parts: scripts/gpu/records.sh): builds the package with the
# records' instantiations and stashes FA4's second part. Not an H200: no records can come, so it runs
# the CUDA Python tests of the package instead (bench/gpu_pytest.sh; at d338632 on an H100 the same
# files ran under one `pytest -q`: h100-stop70-proof/; at 11ae964 the first four took 140 s and
# the catalogue, whose fixture runs every case first, did not finish in the 60 s left:
# h100-stop74-proof/, so the limit is now 320 s: give such a call about 400 s). Here first:
#   mkdir -p .abp && git rev-parse --short HEAD > .commit && cp bench/results/ab/prepared-records-call1.sh .abp/call1.sh
# then `bash .abp/call1.sh` with carry [".deps", ".commit", ".abp", ".fa4site/part.ab", ".fa4site/SHA256SUMS"].
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1
export FLASHBUF_PACKAGE_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128;bf16_256_256 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
OUT=$O bash scripts/gpu/records.sh prefill-sm90 prefill-serving prefill-paged 2>&1 | tail -3; el package
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  FILES="test_gpu.py test_compat_gpu.py test_reliability.py test_sinks.py test_catalogue.py" PYTHONPATH=$HOME/flashbuf-package \
    timeout 320 bash bench/gpu_pytest.sh -q > $O/pytest-cuda.log 2>&1
  grep -E "^=+ .*(passed|failed|error|skipped)|exit [0-9]+$" $O/pytest-cuda.log; el pytest
fi
(cd $OUT && tar czf c.tgz c)
