# SASS of the lean bf16 D 128 decode kernels (library build, no stamps) and of the traced kernel: where
# the length's global load sits among the first copies. Ran at stop 76 on an H100 (`bash .abp/sass.sh`, carry
# [".deps", ".abp", ".commit"], 48 s); the one-row-tile kernel's first 200 lines: h100-ab-stop76-decode-piece-merge/.
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
source scripts/gpu/device_deps.sh unpack >/dev/null
bash scripts/gpu/trace_decode_build.sh . /root/bs; el build
obj=$(find /root/bs -name 'decode_bf16_128.cu.o' | head -1); echo "$obj"
cuobjdump --dump-sass "$obj" > $O/decode-bf16-128.sass 2>&1
cuobjdump --dump-sass /root/bs/flashbuf_trace_decode > $O/trace-decode.sass 2>&1
ls -la $O; el sass
(cd $OUT && tar czf c.tgz c)
