# Shared by scripts/run and scripts/test: install what a fresh machine lacks, then configure
# and build into build/ with every core. CUDA is used when nvcc is found.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

need_apt=()
# The CPU backend's tile products (a required dependency; docs/cpu-backend.md).
[ -f /usr/include/oneapi/dnnl/dnnl.hpp ] || need_apt+=(libdnnl-dev)
command -v cmake >/dev/null || need_apt+=(cmake)
command -v ninja >/dev/null || need_apt+=(ninja-build)
[ -f /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev)
command -v ccache >/dev/null || need_apt+=(ccache)
[ -f /usr/include/CLI/CLI.hpp ] || need_apt+=(libcli11-dev)
[ -f /usr/include/nlohmann/json.hpp ] || need_apt+=(nlohmann-json3-dev)
if [ ${#need_apt[@]} -gt 0 ] && command -v apt-get >/dev/null; then
  SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
  $SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null || \
    echo "note: could not install ${need_apt[*]} (continuing)" >&2
fi

build_flashbuf() {
  cmake -S "$ROOT" -B "$ROOT/build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
  cmake --build "$ROOT/build" -j"$(nproc)"
}
