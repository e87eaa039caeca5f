# H200 call 3, right after prepared-records-call2.sh on the warm machine (FA4's two parts and the
# package are there already): the decode file of record (about 214 s), then the spread-cluster A/B
# (about 150 s; prepared-decode-spread-call.sh: the plan's spread-cluster rule and its held extension). Here first:
#   cp bench/results/ab/prepared-records-call3.sh .abp/call3.sh
# then `bash .abp/call3.sh` with carry [".commit", ".abp"].
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: no files of record"; exit 0; }
export FLASHBUF_PACKAGE_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_64_64;bf16_128_128;bf16_256_256 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
OUT=$O bash scripts/gpu/records.sh decode 2>&1 | grep -E "^records:|cudnn|median"
el decode; (cd $OUT && tar czf c.tgz c)
timeout 250 bash bench/results/ab/prepared-decode-spread-call.sh 2>&1 | tail -50
