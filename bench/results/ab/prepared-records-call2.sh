# H200 call 2 of 2, right after prepared-records-call1.sh on the warm machine: FA4's first part
# completes it, then records.sh makes the prefill files of record one at a time, each packed as it
# ends (so a cut call still brings back the ones done). Here first:
#   cp bench/results/ab/prepared-records-call2.sh .abp/call2.sh
# then `bash .abp/call2.sh` with carry [".commit", ".abp", ".fa4site/part.aa", ".fa4site/SHA256SUMS"].
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: no files of record"; exit 0; }
export FLASHBUF_PACKAGE_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128;bf16_256_256 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
for name in prefill-sm90 prefill-serving prefill-paged; do
  OUT=$O bash scripts/gpu/records.sh $name 2>&1 | grep -E "^records:|flashbuf / fa4|median"
  el $name; (cd $OUT && tar czf c.tgz c)
done
