# The decode latency rows at the head after the push merge (89ccf26), beside cuDNN and FA2 on the
# same tensors, on whatever card comes (not a file of record): one call, carry [".deps", ".abp",
# ".commit"] with this file as .abp/call.sh.
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1 | tee $O/gpu.txt
source scripts/gpu/device_deps.sh unpack >/dev/null
export FLASHBUF_PACKAGE_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
source scripts/gpu/commit_package.sh
commit_package $HOME/flashbuf-package $O/pip.log || { tail -20 $O/pip.log; exit 1; }; el package
root=$PWD; card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oiE 'h[0-9]{3}' | tr 'A-Z' 'a-z')
(cd /tmp && PYTHONPATH=$HOME/flashbuf-package PYTHONUNBUFFERED=1 timeout 200 python3 $root/bench/bench.py --decode \
  --heads 32/8,64/8,32/32 --b 1,8 --kv 512,2048,8192 --pages 0,16 --target-ms 5 --rounds 3 \
  --out $O/$card-decode-latency-$(cat $root/.commit).json > $O/bench.log 2>&1); echo "bench exit $?"
tail -40 $O/bench.log; el bench
(cd $OUT && tar czf c.tgz c)
