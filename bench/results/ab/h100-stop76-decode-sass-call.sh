# SASS of the lean bf16 D 128 decode kernels (library build, no stamps) and of the traced kernel: where
# the length's global load sits among the first copies. Ran at stop 76 on an H100 (`bash .abp/sass.sh`, carry
# [".deps", ".abp", ".commit"], 48 s); the one-row-tile kernel's first 200 lines: h100-ab-stop76-decode-piece-merge/.
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
source scripts/gpu/device_deps.sh unpack >/dev/null
cmake -S . -B /root/bs -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHBUF_ENABLE_CUDA=ON -DFLASHBUF_CUDA_ARCHS=90a \
  -DFLASHBUF_BUILD_PYTHON=OFF -DFLASHBUF_BUILD_TESTS=OFF -DFLASHBUF_BUILD_TOOLS=OFF -DFLASHBUF_BUILD_TUNER=ON \
  -DFLASHBUF_INSTANTIATIONS=bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128 >/dev/null &&
cmake --build /root/bs -j16 --target flashbuf_trace_decode >/dev/null; el build
obj=$(find /root/bs -name 'decode_bf16_128.cu.o' | head -1); echo "$obj"
cuobjdump --dump-sass "$obj" > $O/decode-bf16-128.sass 2>&1
cuobjdump --dump-sass /root/bs/flashbuf_trace_decode > $O/trace-decode.sass 2>&1
ls -la $O; el sass
(cd $OUT && tar czf c.tgz c)
