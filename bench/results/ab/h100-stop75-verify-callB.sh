# Call B, right after A on the warm machine: every Python test on CUDA and CPU against the package
# A built (rebuilt here if the machine is a fresh one).
O=$OUT/v; mkdir -p $O
source scripts/gpu/device_deps.sh unpack >/dev/null 2>&1
if [ ! -d /root/flashbuf-site/flashbuf ]; then
  echo "no package from call A: building it"
  CMAKE_BUILD_PARALLEL_LEVEL=16 CMAKE_ARGS="-DFLASHBUF_CUDA_ARCHS=90a;80" \
    python3 -m pip install --no-build-isolation --no-deps --upgrade --target /root/flashbuf-site . > $O/pip.log 2>&1 || { tail -30 $O/pip.log; exit 1; }
fi
timeout 590 env OUT=$O PYTEST_TIMEOUT_S=${PYTEST_TIMEOUT_S:-540} bash scripts/gpu/verify.sh python 2>&1 | tail -40
ls $O
